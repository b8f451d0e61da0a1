package parley

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// The bodies of the API's requests, as clients send them and the server
// reads them. The server refuses a body with a field not named here, so
// that a typo is an error instead of a field silently ignored. Whom a
// request acts as (AgentID) is needed only with an admin token or on a
// server running open: an agent token acts as its agent.

// CreateConversationRequest is the body of POST /v1/conversations.
type CreateConversationRequest struct {
	ID            string          `json:"id,omitempty"`
	Title         string          `json:"title,omitempty"`
	Participants  []string        `json:"participants,omitempty"`
	Members       []string        `json:"members,omitempty"`
	TurnPolicy    TurnPolicy      `json:"turnPolicy,omitempty"`
	MessageFormat string          `json:"messageFormat,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	// TurnLeaseMs is the conversation's own turn lease in milliseconds
	// (1000 to 86400000); zero for the server's (serve -turn-lease).
	TurnLeaseMs int64 `json:"turnLeaseMs,omitempty"`
}

// Precondition is a turn precondition of a write: the writer expects to
// start turn ExpectTurn (StartingTurn), or to continue it.
type Precondition struct {
	ExpectTurn   int  `json:"expectTurn"`
	StartingTurn bool `json:"startingTurn"`
}

// PostMessageRequest is the body of POST …/messages: one whole message.
// Give Content or Parts.
type PostMessageRequest struct {
	ID              string          `json:"id,omitempty"`
	AgentID         string          `json:"agentId,omitempty"`
	Role            Role            `json:"role,omitempty"`
	Content         string          `json:"content,omitempty"`
	Parts           []Part          `json:"parts,omitempty"`
	ReplyTo         string          `json:"replyTo,omitempty"`
	TurnID          string          `json:"turnId,omitempty"`
	Finality        Finality        `json:"finality,omitempty"`
	Next            string          `json:"next,omitempty"`
	Precondition    *Precondition   `json:"precondition,omitempty"`
	Channel         *Channel        `json:"channel,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	ClientRequestID string          `json:"clientRequestId,omitempty"`
}

// PostEventRequest is the body of POST …/events: an event of type Type
// (a trace) with its payload.
type PostEventRequest struct {
	Type            string          `json:"type"`
	ID              string          `json:"id,omitempty"`
	AgentID         string          `json:"agentId,omitempty"`
	Payload         json.RawMessage `json:"payload,omitempty"`
	TurnID          string          `json:"turnId,omitempty"`
	Finality        Finality        `json:"finality,omitempty"`
	Precondition    *Precondition   `json:"precondition,omitempty"`
	ClientRequestID string          `json:"clientRequestId,omitempty"`
}

// ClaimTurnRequest is the body of POST …/turns/claim. ExpectTurn, if not
// 0, must be the turn claimed; TTLMs is how long the claim holds (0: the
// server's default).
type ClaimTurnRequest struct {
	AgentID    string `json:"agentId,omitempty"`
	ExpectTurn int    `json:"expectTurn,omitempty"`
	TTLMs      int64  `json:"ttlMs,omitempty"`
}

// ResetTurnRequest is the body of POST …/turns/reset. With Claim, an
// agent that owns no open turn claims the next one instead, for TTLMs.
type ResetTurnRequest struct {
	AgentID string `json:"agentId,omitempty"`
	Claim   bool   `json:"claim,omitempty"`
	TTLMs   int64  `json:"ttlMs,omitempty"`
}

// AbortTurnRequest is the body of POST …/turns/abort.
type AbortTurnRequest struct {
	AgentID string `json:"agentId,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// DelegateRequest is the body of POST …/delegations: the owner of the
// open turn lets To write into it.
type DelegateRequest struct {
	AgentID string `json:"agentId,omitempty"`
	To      string `json:"to"`
}

// QueuePromptRequest is the body of POST …/prompts.
type QueuePromptRequest struct {
	// ID is the prompt's id, which its user message takes (default: the
	// server makes one).
	ID string `json:"id,omitempty"`
	// AgentID asks as that agent.
	AgentID string `json:"agentId,omitempty"`
	Content string `json:"content"`
	// Mode is followup (default), steer, collect or reject.
	Mode string `json:"mode,omitempty"`
	// To names the agent whose runner should answer (default: any).
	To string `json:"to,omitempty"`
	// Channel is where the prompt came from; the answer goes back there
	// (through the server's channel webhook). Only an admin token may set
	// it: a channel's bridge posts its prompts.
	Channel *Channel `json:"channel,omitempty"`
	// ClientRequestID makes a retry safe: the same key and body queue the
	// prompt once, and the retry gets the first answer.
	ClientRequestID string `json:"clientRequestId,omitempty"`
}

// PromptActionRequest is the body of a withdraw (DELETE …/prompts/{pid})
// or promote (POST …/prompts/{pid}/promote) of a prompt: who acts.
type PromptActionRequest struct {
	AgentID string `json:"agentId,omitempty"`
}

// StopRequest is the body of POST …/abort, which may be empty: the prompt
// whose answer is meant (none: whatever answer is under way), and who
// stops it.
type StopRequest struct {
	AgentID  string `json:"agentId,omitempty"`
	PromptID string `json:"promptId,omitempty"`
}

// RevertRequest is the body of POST …/revert: the message to remove, with
// every message after it.
type RevertRequest struct {
	AgentID   string `json:"agentId,omitempty"`
	MessageID string `json:"messageId"`
}

// CreateTaskRequest is the body of POST /v1/tasks: a prompt queued in a
// conversation on a schedule, by five-field cron (read in UTC) or every
// EveryMs milliseconds (at least 1000). Give one of them.
type CreateTaskRequest struct {
	ID             string `json:"id,omitempty"`
	ConversationID string `json:"conversationId"`
	AgentID        string `json:"agentId,omitempty"`
	Prompt         string `json:"prompt"`
	Cron           string `json:"cron,omitempty"`
	EveryMs        int64  `json:"everyMs,omitempty"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	// Kind is TokenAgent (with an AgentID), TokenViewer or TokenAdmin.
	Kind    TokenKind `json:"kind"`
	AgentID string    `json:"agentId,omitempty"`
	// Name is a label for people (which machine, which job).
	Name string `json:"name,omitempty"`
}

// AnswerInputRequest is the body of POST …/inputs/{requestId}: the answer
// to an input request (an approval's is {"approved", "reason"?}; a
// question's fits its schema).
type AnswerInputRequest struct {
	AgentID string          `json:"agentId,omitempty"`
	Answer  json.RawMessage `json:"answer"`
}

// AnswerInputResult is the answer to POST …/inputs/{requestId}: the
// request as it now is, and the seq of the event that ended it (the first
// answer's, when the same answer came again).
type AnswerInputResult struct {
	Input Input `json:"input"`
	Seq   int64 `json:"seq"`
}

// InputList is the answer to GET …/inputs.
type InputList struct {
	Inputs []Input `json:"inputs"`
}

// RequestHash identifies a write's request for idempotency: the SHA-256 of
// its canonical JSON (object keys sorted at every level, metadata and
// payloads included, no white space). Callers take it with the request's
// client request id cleared, so that a retry is the same request whatever
// its spacing or key order. It hashes the body as its API reads it: a
// request made through MCP and retried over HTTP with the same key has
// two shapes, two hashes, and is refused as a different request.
func RequestHash(v any) string {
	b, err := json.Marshal(v)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var generic any
		if dec.Decode(&generic) == nil {
			if c, err := json.Marshal(generic); err == nil {
				b = c
			}
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
