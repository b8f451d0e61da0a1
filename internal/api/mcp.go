package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// serveMCP serves POST /v1/mcp: the call's body is read as every
// endpoint's body is (within the server's budget of bodies, at most
// MaxBodyBytes: 413 too_large past it, the connection closed), and the MCP
// adapter serves it as who.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	max := s.opts.MaxBodyBytes
	n, err := s.reserveBody(w, r, max, max)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	s.bodies.Release(n)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = tooLarge(max)
		} else {
			err = parley.Errorf(parley.EINVALID, "the body could not be read: %v", err)
		}
		writeErr(w, s.log, err)
		return
	}
	bodyRead(w)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	s.mcp.ServeHTTP(w, r, who)
}

// mcpHost lends the MCP adapter (package mcp) the checks and reads the
// HTTP handlers hold, so that a tool and its endpoint share them.
type mcpHost struct{ s *Server }

// Actor implements mcp.Host.
func (mcpHost) Actor(who parley.Identity, agentID string) (conv.Actor, error) {
	return actor(who, agentID)
}

// Conversations implements mcp.Host.
func (h mcpHost) Conversations(ctx context.Context, who parley.Identity, p store.ListConversationsParams) ([]*engine.View, string, error) {
	return h.s.conversationPage(ctx, who, p)
}

// Search implements mcp.Host.
func (h mcpHost) Search(ctx context.Context, who parley.Identity, text, convID string, limit int, cursor string) ([]parley.SearchHit, string, error) {
	return h.s.searchHits(ctx, who, text, convID, limit, cursor)
}

// AnswerInput implements mcp.Host.
func (h mcpHost) AnswerInput(ctx context.Context, id, requestID string, answer []byte, act conv.Actor) (*parley.AnswerInputResult, error) {
	return h.s.AnswerInput(ctx, id, requestID, answer, act)
}

// ClaimTTL implements mcp.Host.
func (h mcpHost) ClaimTTL(ms int64) (time.Duration, error) { return h.s.ttl(ms) }
