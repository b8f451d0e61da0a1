// Package parley holds the domain types of the Parley conversation server:
// conversations, events and their data, messages and their parts, positions,
// heads, guidance, the prompt queue, tokens, the bodies of the API's requests
// and the error type. The server and the Go SDK (package client) both build
// on these, and nothing here does I/O.
//
// The rules that turn commands into events live in package conv; storage lives
// behind the interface of package store; package engine is the one write path;
// package api serves HTTP, SSE and WebSocket; cmd/parley wires them together.
package parley

import (
	"bytes"
	"encoding/json"
	"time"
)

// Finality says what a message closes: nothing, the open turn, or the whole
// conversation. Only message events may carry a finality other than none.
type Finality string

// Finality values.
const (
	FinalityNone         Finality = "none"
	FinalityTurn         Finality = "turn"
	FinalityConversation Finality = "conversation"
)

// Valid reports whether f is one of the three finality values.
func (f Finality) Valid() bool {
	return f == FinalityNone || f == FinalityTurn || f == FinalityConversation
}

// TurnPolicy decides which agent the guidance names after a turn closes.
type TurnPolicy string

// Turn policies.
const (
	// PolicyRoundRobin names the participant after the one that owned the last turn.
	PolicyRoundRobin TurnPolicy = "round-robin"
	// PolicyFree names nobody: any agent may open the next turn.
	PolicyFree TurnPolicy = "free"
	// PolicyNext names the agent given in the closing message's "next" field.
	PolicyNext TurnPolicy = "next"
)

// Valid reports whether p is a known policy.
func (p TurnPolicy) Valid() bool {
	return p == PolicyRoundRobin || p == PolicyFree || p == PolicyNext
}

// Conversation is one log. Its epoch is random and changes only if its history
// is replaced; a client holding another epoch must reload. Participants are
// the agents the turn policy takes turns among; Members are agents (people,
// tools) that take part too but whom the turn policy never names. Only they,
// the agent that created the conversation, and admins read and write it.
type Conversation struct {
	ID            string          `json:"id"`
	Epoch         string          `json:"epoch"`
	Title         string          `json:"title,omitempty"`
	Participants  []string        `json:"participants"`
	Members       []string        `json:"members,omitempty"`
	TurnPolicy    TurnPolicy      `json:"turnPolicy"`
	MessageFormat string          `json:"messageFormat"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	CreatedBy     string          `json:"createdBy,omitempty"`
	CreatedAt     Time            `json:"createdAt"`
	// TurnLeaseMs is the conversation's turn lease in milliseconds: an
	// open turn whose owner has no runner attached and into which nothing
	// is written for this long is aborted (reason "timeout"). Zero (left
	// out) means the server's (parley serve -turn-lease).
	TurnLeaseMs int64 `json:"turnLeaseMs,omitempty"`
}

// Position is a place in one conversation's log: the last seq a reader has
// seen and the epoch it was seen in.
type Position struct {
	Seq   int64  `json:"seq"`
	Epoch string `json:"epoch"`
}

// OpenTurn describes the turn that is open, if any.
type OpenTurn struct {
	Turn      int      `json:"turn"`
	Owner     string   `json:"owner"`
	TurnID    string   `json:"turnId,omitempty"`
	Delegates []string `json:"delegates,omitempty"`
	OpenedSeq int64    `json:"openedSeq"`
	// Reset is true after the owner reset the turn and before it wrote again.
	Reset bool `json:"reset,omitempty"`
}

// Claim is an agent's reservation of the next turn; it lapses at ExpiresAt.
type Claim struct {
	AgentID   string `json:"agentId"`
	Turn      int    `json:"turn"`
	ExpiresAt Time   `json:"expiresAt"`
}

// Head is the summary of a conversation's state that callers decide with: it
// comes with every conversation read and with every 409.
type Head struct {
	LastSeq       int64     `json:"lastSeq"`
	Epoch         string    `json:"epoch"`
	LastTurn      int       `json:"lastTurn"`
	OpenTurn      *OpenTurn `json:"openTurn"`
	Claim         *Claim    `json:"claim"`
	Closed        bool      `json:"closed"`
	LastClosedSeq int64     `json:"lastClosedSeq"`
	// LastEventAt is when the last event was written: the conversation's
	// last activity.
	LastEventAt Time `json:"lastEventAt"`
	// PendingInputs are the input requests that agents wait on a person
	// to answer, oldest first.
	PendingInputs []PendingInput `json:"pendingInputs,omitempty"`
}

// GuidanceKind says whether the named agent should start a new turn or
// continue its open one.
type GuidanceKind string

// Guidance kinds.
const (
	GuidanceStartTurn    GuidanceKind = "start_turn"
	GuidanceContinueTurn GuidanceKind = "continue_turn"
)

// Guidance tells subscribers who should act next. It is derived from state
// after every change and never stored. An empty NextAgentID means any agent may
// take the turn. Turn is always explicit: agents never infer it.
type Guidance struct {
	NextAgentID string       `json:"nextAgentId"`
	Kind        GuidanceKind `json:"kind"`
	Turn        int          `json:"turn"`
	AfterSeq    int64        `json:"afterSeq"`
	// Runners are the agents with a runner attached that answers in the
	// conversation, on any node, sorted: its own runners and the
	// agent-wide runners of the agents that take part in it. None: nobody
	// answers its prompts until a runner connects. It is presence, never
	// stored: a new guidance is sent whenever it changes.
	Runners []string `json:"runners,omitempty"`
}

// Time is a UTC instant with millisecond precision. It is encoded in JSON as
// RFC 3339 with exactly three fractional digits, as every time in the API is.
type Time struct{ time.Time }

// TimeLayout is the layout of every time Parley writes.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// NewTime returns t in UTC truncated to milliseconds.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte(`null`), nil
	}
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler; it accepts any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && !bytes.ContainsAny(b[1:n-1], `"\\`) {
		s = string(b[1 : n-1]) // the usual case, without a second JSON decode
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	*t = NewTime(v)
	return nil
}
