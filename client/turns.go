package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
)

// ClaimOptions are what a claim of the next turn may say.
type ClaimOptions struct {
	// AgentID claims for that agent (needed only with an admin token or an
	// open server; an agent token claims for its agent).
	AgentID string
	// ExpectTurn, if not 0, must be the turn claimed (lastTurn+1).
	ExpectTurn int
	// TTL is how long the claim holds, in whole milliseconds (0: the
	// server's default, 30s; at most its -max-claim-ttl, 10m).
	TTL time.Duration
}

// ClaimWith claims the next turn as o says: the first claim wins (409
// claim_conflict for the others), the holder may claim again to extend it.
func (c *Client) ClaimWith(ctx context.Context, conversationID string, o ClaimOptions) (*TurnResult, error) {
	body := parley.ClaimTurnRequest{AgentID: o.AgentID, ExpectTurn: o.ExpectTurn, TTLMs: o.TTL.Milliseconds()}
	return call[TurnResult](ctx, c, http.MethodPost, convPath(conversationID, "/turns/claim"), body)
}

// ResetOptions are what a reset of a turn may say.
type ResetOptions struct {
	// AgentID resets for that agent (admin tokens and open servers only).
	AgentID string
	// Claim, for an agent that does not own the open turn, claims the next
	// turn instead (reset-and-claim).
	Claim bool
	// TTL is how long such a claim holds (0: the server's default).
	TTL time.Duration
}

// ResetWith resets the agent's open turn ("let me try again": one
// turn.reset marker, same turn number), or with o.Claim claims the next
// turn when the agent owns none.
func (c *Client) ResetWith(ctx context.Context, conversationID string, o ResetOptions) (*TurnResult, error) {
	body := parley.ResetTurnRequest{AgentID: o.AgentID, Claim: o.Claim, TTLMs: o.TTL.Milliseconds()}
	return call[TurnResult](ctx, c, http.MethodPost, convPath(conversationID, "/turns/reset"), body)
}

// NewTrace is the body of PostTrace: an agent's trace (a thought, a tool
// trace), which follows the turn rules (it opens or continues the writer's
// turn) and never closes anything.
type NewTrace struct {
	ID              string          `json:"id,omitempty"`
	AgentID         string          `json:"agentId,omitempty"`
	Payload         json.RawMessage `json:"payload"`
	TurnID          string          `json:"turnId,omitempty"`
	Precondition    *Precondition   `json:"precondition,omitempty"`
	ClientRequestID string          `json:"clientRequestId,omitempty"`
}

// PostTrace writes a trace event and returns it as stored (its Data is a
// parley.Trace; DecodeEvent reads it).
func (c *Client) PostTrace(ctx context.Context, conversationID string, t NewTrace) (*parley.Event, error) {
	body := parley.PostEventRequest{Type: parley.EventTrace, ID: t.ID, AgentID: t.AgentID, Payload: t.Payload,
		TurnID: t.TurnID, Precondition: t.Precondition, ClientRequestID: t.ClientRequestID}
	if body.Payload == nil {
		body.Payload = json.RawMessage("null") // NewTrace's payload is sent even when nil
	}
	r, err := call[struct {
		Event parley.Event `json:"event"`
	}](ctx, c, http.MethodPost, convPath(conversationID, "/events"), body)
	if err != nil {
		return nil, err
	}
	return &r.Event, nil
}
