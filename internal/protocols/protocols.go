// Package protocols adapts the protocols of other ecosystems to Parley's
// conversations: the Vercel AI SDK's chat (POST /v1/chat, GET
// /v1/chat/{id}/stream; chat.go) and AG-UI (POST /v1/ag-ui; agui.go). A
// protocol's request is translated into the engine's commands (a
// conversation made on first use, a prompt queued, an exchange reverted),
// and the answer, read from the conversation's log (answer.go), into the
// protocol's stream. The rules (who may ask, which exchange a regenerate
// removes, where a question stands) are package conv's, found through the
// engine and the read side (package reads); this package decides none.
//
// The adapters are mounted by the HTTP API (package api), which
// authenticates each request and lends them its plumbing through Host:
// error answers, request bodies, connections and quotas. Other protocols
// (MCP, A2A) belong here too, an adapter each.
package protocols

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/transport"
)

// Host is what the adapters take from the HTTP API that mounts them, so
// that each of these is written once, there.
type Host interface {
	// WriteError answers err: its status and JSON error body.
	WriteError(w http.ResponseWriter, err error)
	// Refuse answers err without reading the request's body.
	Refuse(w http.ResponseWriter, r *http.Request, err error)
	// DecodeBody reads one JSON object of at most max bytes from the
	// request's body, within the server's budget of bodies.
	DecodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error
	// ConnectStream records a stream of who (bounded per token; over the
	// bound it answers itself and ok is false). It returns the stream's
	// context, which revoking the token ends, and done, to call when the
	// stream ends.
	ConnectStream(w http.ResponseWriter, r *http.Request, who parley.Identity) (ctx context.Context, done func(), ok bool)
	// ConnectReader records a stream of the conversation the path names
	// ({id}), which end ends when who may no longer read it; when it
	// may not, or is over its bound, it answers itself and ok is false.
	ConnectReader(w http.ResponseWriter, r *http.Request, who parley.Identity, end func(error)) (release func(), ok bool)
	// Readable checks that who may read the conversation the path names.
	Readable(r *http.Request, who parley.Identity) error
	// Actor decides who a write by who acts as, given the agent its body
	// names.
	Actor(who parley.Identity, bodyAgent string) (conv.Actor, error)
	// AllowCreate counts a conversation made toward who's creation rate,
	// or refuses it.
	AllowCreate(who parley.Identity) error
	// Inputs lists the input requests of conversation id that it holds:
	// those pending, and those that ended lately (the last ones, at least
	// until their asker took their outcome); pending ones in the order
	// they were asked. With parts, each has its Part, Kind and ToolCallID
	// (read from its message); without, only ids, message and status.
	Inputs(ctx context.Context, id string, parts bool) ([]Input, error)
	// AnswerInput answers input request requestID of conversation id as
	// act, as POST /v1/conversations/{id}/inputs/{requestId} does: the
	// same answer again is no error, and who may answer is the core's to
	// decide.
	AnswerInput(ctx context.Context, act conv.Actor, id, requestID string, answer json.RawMessage) error
}

// Input is an input request of a conversation as the adapters need it:
// which it is, the message that asks it, and where it stands.
type Input struct {
	RequestID  string
	MessageID  string
	Kind       string // approval or question
	Status     string // pending, answered, expired or canceled
	ToolCallID string
	// Part is the request's part, as its message holds it.
	Part parley.Part
}

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// Heartbeat is how long an answer's stream may be silent before it
	// gets a ping (default 15s).
	Heartbeat time.Duration
	// WriteTimeout bounds one batch of writes to a client that does not
	// read (default 10s); past it the client is dropped.
	WriteTimeout time.Duration
	// A2ACards are the A2A agent cards' names, descriptions and skills, by
	// agent id (see ReadA2ACards); an agent not named gets a default card.
	A2ACards map[string]A2ACard
}

// Server serves the protocols' endpoints; its handlers are mounted by the
// HTTP API, behind its authentication.
type Server struct {
	eng     *engine.Engine
	rd      *reads.Reader
	runners *runners.Dispatcher
	streams *transport.Streams // for the error frame of a stream the server ends
	host    Host
	opts    Options
}

// New returns the protocols' adapters over eng, the read side and the
// runners, mounted by host.
func New(eng *engine.Engine, rd *reads.Reader, rn *runners.Dispatcher, streams *transport.Streams, host Host, opts Options) *Server {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	return &Server{eng: eng, rd: rd, runners: rn, streams: streams, host: host, opts: opts}
}
