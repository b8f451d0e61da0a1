// Package mcp serves Parley as a Model Context Protocol server (POST
// /v1/mcp, Streamable HTTP, stateless): an agent that speaks MCP (Claude
// Code, Cursor, the OpenAI Agents SDK…) joins conversations with the
// server's URL and a Parley token, and no runner code. Each tool is one of
// the HTTP API's reads or commands (tools.go, wait.go): the same engine
// commands, the same read side, the same rules of who may do what (package
// conv's), found through the engine; this package decides none.
//
// The HTTP API (package api) authenticates each request with its own
// bearer-token check and lends the adapter what it holds through Host.
package mcp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// Host is what the tools take from the HTTP API that mounts them, so that
// each of these is written once, there.
type Host interface {
	// Actor decides who a write by who acts as, given the agentId the
	// tool's arguments name (an admin must name one; an agent may name
	// only itself; a viewer may not write).
	Actor(who parley.Identity, agentID string) (conv.Actor, error)
	// Conversations lists a page of the conversations who may read, as
	// GET /v1/conversations does.
	Conversations(ctx context.Context, who parley.Identity, p store.ListConversationsParams) ([]*engine.View, string, error)
	// Search searches messages as GET /v1/search does.
	Search(ctx context.Context, who parley.Identity, text, conversationID string, limit int, cursor string) ([]parley.SearchHit, string, error)
	// AnswerInput answers an input request as POST …/inputs/{requestId}
	// does.
	AnswerInput(ctx context.Context, id, requestID string, answer []byte, act conv.Actor) (*parley.AnswerInputResult, error)
	// ClaimTTL reads a claim's ttlMs as POST …/turns/claim does.
	ClaimTTL(ms int64) (time.Duration, error)
}

// Options configure the adapter.
type Options struct {
	// MaxBodyBytes bounds a request's body: its tool call and arguments.
	MaxBodyBytes int64
	// PageBytes bounds a page of messages or conversations in a tool's
	// answer (at most ResponseBytes).
	PageBytes int
	// MaxConnsPerToken bounds the waits (wait_for_turn, ask_agent) a token
	// holds at once, with its streams.
	MaxConnsPerToken int
	// Logger receives internal errors.
	Logger *slog.Logger
	// Version is the server's version, told to clients.
	Version string
}

// ResponseBytes bounds the messages or conversations of one tool's answer:
// past it a page ends early and says where to go on.
const ResponseBytes = 256 << 10

// Server is the MCP endpoint.
type Server struct {
	eng     *engine.Engine
	rd      *reads.Reader
	host    Host
	opts    Options
	schemas *gomcp.SchemaCache
	handler *gomcp.StreamableHTTPHandler
}

// New returns the MCP endpoint over eng and rd.
func New(eng *engine.Engine, rd *reads.Reader, host Host, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PageBytes <= 0 || opts.PageBytes > ResponseBytes {
		opts.PageBytes = ResponseBytes
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{eng: eng, rd: rd, host: host, opts: opts, schemas: gomcp.NewSchemaCache()}
	s.handler = gomcp.NewStreamableHTTPHandler(s.serverFor, &gomcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, MaxRequestBodyBytes: opts.MaxBodyBytes,
		// The API's own checks answer DNS rebinding: every request carries
		// a token (a page on a rebound name has none, nor the cookie), and
		// an open server answers only its own host names (checkOpen). The
		// SDK's check would refuse a server on loopback behind a proxy
		// that passes the public Host on.
		DisableLocalhostProtection: true,
	})
	return s
}

// whoKey holds a request's identity in its context.
type whoKey struct{}

// ServeHTTP serves one MCP request of who, whom the API authenticated.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	s.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, who)))
}

// serverFor makes the MCP server of one request: its tools act as who.
// Stateless, a server lives for one request; the tools' schemas are
// inferred once (schemas).
func (s *Server) serverFor(r *http.Request) *gomcp.Server {
	who, _ := r.Context().Value(whoKey{}).(parley.Identity)
	srv := gomcp.NewServer(&gomcp.Implementation{Name: "parley", Title: "Parley", Version: s.opts.Version}, &gomcp.ServerOptions{
		Instructions: instructions, SchemaCache: s.schemas,
	})
	s.addTools(srv, who)
	return srv
}

// instructions tell a client's model how the tools fit together.
const instructions = `Parley hosts conversations between agents and people, one turn at a time.
Find your conversations with list_conversations, read them with read_conversation (go on from nextAfter).
Before you write, call wait_for_turn: it returns when the conversation's guidance names you.
Then post_message; finality "turn" ends your turn (next names who speaks next), "conversation" closes it.
ask_agent asks another agent and waits for its answer; answer_input answers a question or approval asked of you.
With an admin token, give agentId: the agent you act as.`

// tool adapts a tool's function to the SDK's: it acts as who, and an
// error becomes a tool error whose text starts with the API's error code
// and says what to do next.
func tool[In, Out any](s *Server, who parley.Identity, run func(ctx context.Context, who parley.Identity, in *In) (Out, error)) gomcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, _ *gomcp.CallToolRequest, in In) (*gomcp.CallToolResult, any, error) {
		out, err := run(ctx, who, &in)
		if err != nil {
			return nil, nil, s.toolError(err)
		}
		return nil, out, nil
	}
}

// toolError is what a tool's caller reads of err: "code: message; hint".
// An internal error is logged and not told.
func (s *Server) toolError(err error) error {
	code := parley.ErrorCode(err)
	msg := parley.ErrorMessage(err)
	if code == parley.EINTERNAL {
		s.opts.Logger.Error("mcp tool", slog.Any("err", err))
		msg = "the server failed"
	}
	if h := hints[code]; h != "" {
		msg += "; " + h
	}
	return errors.New(code + ": " + msg)
}

// hints say what to do after an error of each code.
var hints = map[string]string{
	parley.ETURNCONFLICT:  "call wait_for_turn first, then write",
	parley.ECLAIMCONFLICT: "another agent holds the claim: call wait_for_turn, then claim_turn again",
	parley.EPRECONDITION:  "read_conversation for the current head, then try again",
	parley.ECLOSED:        "the conversation is closed: nothing more can be written to it",
	parley.EFORBIDDEN:     "this token may not do this: use a token with that right, or a conversation you take part in",
	parley.ENOTFOUND:      "check the id (list_conversations lists yours)",
	parley.EINVALID:       "fix the arguments and call again",
	parley.EINVALIDVALUE:  "fix the arguments and call again",
	parley.ETOOLARGE:      "send less: split it, or shorten it",
	parley.EINVALIDTHREAD: "reply to a message of this conversation that may take replies",
	parley.EINPUTENDED:    "the request was answered otherwise or ended: read_conversation to see it",
	parley.ERATELIMITED:   "wait a little and try again",
	parley.EUNAVAILABLE:   "the server is shutting down or not ready: try again later",
	parley.EINTERNAL:      "try again later",
}

// bounded reads an optional count argument: def when 0, else 1 to max.
func bounded(name string, n, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > max:
		return 0, parley.Errorf(parley.EINVALIDVALUE, "%s must be from 1 to %d (or left out for %d), not %d", name, max, def, n)
	}
	return n, nil
}

// checkID checks that an argument is an id.
func checkID(name, id string) error {
	if !parley.ValidID(id) {
		return parley.Errorf(parley.EINVALIDVALUE, "%s %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", name, id)
	}
	return nil
}
