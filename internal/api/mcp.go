package api

import (
	"context"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

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
