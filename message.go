package parley

import (
	"encoding/json"
	"strings"
)

// Role is who speaks in a message.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	return r == RoleUser || r == RoleAssistant || r == RoleSystem || r == RoleTool
}

// MessageStatus is the life-cycle state of a message.
type MessageStatus string

// Message statuses.
const (
	StatusStreaming MessageStatus = "streaming"
	StatusComplete  MessageStatus = "complete"
	StatusCanceled  MessageStatus = "canceled"
	StatusError     MessageStatus = "error"
)

// Part kinds.
const (
	PartText     = "text"
	PartToolCall = "tool-call"
	PartFinish   = "finish"
	PartError    = "error"
)

// Tool call statuses.
const (
	ToolPending   = "pending"
	ToolRunning   = "running"
	ToolCompleted = "completed"
	ToolError     = "error"
)

// Finish reasons.
const (
	FinishEndTurn  = "end_turn"
	FinishError    = "error"
	FinishCanceled = "canceled"
)

// Part is one typed piece of a message. Which fields are set depends on Type:
//
//	text:      Text, Streaming
//	tool-call: CallID, ToolName, Status, Args, Result, Error
//	finish:    Reason (end_turn | error | canceled)
//	error:     Message
type Part struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Streaming bool            `json:"streaming,omitempty"`
	CallID    string          `json:"callId,omitempty"`
	ToolName  string          `json:"toolName,omitempty"`
	Status    string          `json:"status,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Message   string          `json:"message,omitempty"`
}

// Channel names where a message came from outside Parley (a chat platform).
type Channel struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Message is what a person or agent says. Seq is the seq of the event that
// wrote it; Depth is the number of its ancestors by replyTo. RetryOf names
// the failed message a failover retry replaces (the failed one stays). While a message
// streams, its stored row is complete as of UpdatedSeq: the chunk events
// after that seq hold the rest of its text.
type Message struct {
	ID             string          `json:"id"`
	ConversationID string          `json:"conversationId"`
	Seq            int64           `json:"seq"`
	Role           Role            `json:"role"`
	AgentID        string          `json:"agentId"`
	Parts          []Part          `json:"parts"`
	Content        string          `json:"content"`
	Status         MessageStatus   `json:"status"`
	Turn           int             `json:"turn"`
	TurnID         string          `json:"turnId"`
	ReplyTo        string          `json:"replyTo,omitempty"`
	Depth          int             `json:"depth"`
	Finality       Finality        `json:"finality"`
	Next           string          `json:"next,omitempty"`
	RetryOf        string          `json:"retryOf,omitempty"`
	Channel        *Channel        `json:"channel,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	UpdatedSeq     int64           `json:"updatedSeq,omitempty"`
	Legacy         *Legacy         `json:"legacy,omitempty"`
	CreatedAt      Time            `json:"createdAt"`
	UpdatedAt      Time            `json:"updatedAt"`
}

// Legacy marks a message imported from data that predates Parley's
// threading (parley import of legacy rows). Such a message may have been
// answered by a reply that does not name it, so export falls back to the
// timestamp heuristic for it when no explicit reply exists.
type Legacy struct {
	// Row is the 1-based row of the imported file the message came from.
	Row int `json:"row"`
	// MadeID is true when the row had no message id and the import made one.
	MadeID bool `json:"madeId,omitempty"`
	// SeenBy are the agents whose memory held the message: its recipients.
	SeenBy []string `json:"seenBy,omitempty"`
}

// TextContent returns the plain text of parts: its text parts, concatenated.
func TextContent(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// MaxIDLen is the longest id a client may choose.
const MaxIDLen = 128

// ValidID reports whether s is a valid client-chosen id: 1–128 characters of
// A–Z a–z 0–9 . _ : -
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Delivery is a finalized reply on its way to the channel its prompt came
// from (channel auto-reply). It is written with the reply, in the same
// transaction, and delivered at least once; MessageID is the idempotency key.
type Delivery struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversationId"`
	MessageID      string  `json:"messageId"`
	Channel        Channel `json:"channel"`
	Content        string  `json:"content"`
	Attempts       int     `json:"attempts"`
	NextAttemptAt  Time    `json:"nextAttemptAt"`
	DeliveredAt    Time    `json:"deliveredAt"`
	LastError      string  `json:"lastError,omitempty"`
	CreatedAt      Time    `json:"createdAt"`
}
