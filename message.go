package parley

import (
	"encoding/json"
	"strings"
	"unsafe"
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
//	input-request: RequestID, Kind, Title, Status and, as set, ToolCallID,
//	           ToolName, Args, Detail, Schema, Options, Multiple, ExpiresAt,
//	           Answerers; once ended Answer, AnsweredBy, AnsweredAt, Reason
//	           (see InputRequest)
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

	// The fields of an input-request part (see InputRequest).
	RequestID  string          `json:"requestId,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Title      string          `json:"title,omitempty"`
	Detail     string          `json:"detail,omitempty"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	Options    []InputOption   `json:"options,omitempty"`
	Multiple   bool            `json:"multiple,omitempty"`
	ExpiresAt  Time            `json:"expiresAt,omitzero"`
	Answerers  []string        `json:"answerers,omitempty"`
	Answer     json.RawMessage `json:"answer,omitempty"`
	AnsweredBy string          `json:"answeredBy,omitempty"`
	AnsweredAt Time            `json:"answeredAt,omitzero"`
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
	ID             string        `json:"id"`
	ConversationID string        `json:"conversationId"`
	Seq            int64         `json:"seq"`
	Role           Role          `json:"role"`
	AgentID        string        `json:"agentId"`
	Parts          []Part        `json:"parts"`
	Content        string        `json:"content"`
	Status         MessageStatus `json:"status"`
	// AwaitingInput is true while an input request of the message is
	// pending: the message stays open (status streaming), waiting for a
	// person.
	AwaitingInput bool            `json:"awaitingInput,omitempty"`
	Turn          int             `json:"turn"`
	TurnID        string          `json:"turnId"`
	ReplyTo       string          `json:"replyTo,omitempty"`
	Depth         int             `json:"depth"`
	Finality      Finality        `json:"finality"`
	Next          string          `json:"next,omitempty"`
	RetryOf       string          `json:"retryOf,omitempty"`
	Channel       *Channel        `json:"channel,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	UpdatedSeq    int64           `json:"updatedSeq,omitempty"`
	Legacy        *Legacy         `json:"legacy,omitempty"`
	CreatedAt     Time            `json:"createdAt"`
	UpdatedAt     Time            `json:"updatedAt"`
	// Summarized is set on a copy of a message that leaves out its parts,
	// content, metadata and legacy marks because the message is large (a
	// stream's snapshot does so): fetch the whole message with
	// GET …/messages/{id}. The message itself is never summarized.
	Summarized *Summary `json:"summarized,omitempty"`

	// text holds Content's bytes while the message streams, shared with
	// its copies (see text.go).
	text *textBuf
}

// Summary says what a summarized copy of a message left out.
type Summary struct {
	// Bytes is the size of the whole message in JSON.
	Bytes int `json:"bytes"`
}

// Summarize returns a copy of m that keeps who wrote it, where it stands
// and how it ends (id, seq, role, agent, status, turn, turnId, replyTo,
// depth, finality, next, retryOf, channel, updatedSeq, times) but not its
// parts, content, metadata or legacy marks; bytes is the whole message's
// size in JSON.
func (m *Message) Summarize(bytes int) *Message {
	s := *m
	s.Parts, s.Content, s.Metadata, s.Legacy = []Part{}, "", nil, nil
	s.Summarized = &Summary{Bytes: bytes}
	return &s
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

// AppendText applies a text delta to a streaming message: it extends the
// last part if that is a streaming text part, and otherwise starts a new
// streaming text part (as after a tool call). Content grows by the delta.
// The server assembles messages with it, and clients fold chunk events
// with it, so the two never disagree.
//
// The text grows in place, shared with the copies of m (see text.go): a
// message of many deltas costs its text's bytes, not their square.
func (m *Message) AppendText(delta string) {
	old := m.Content
	m.Content = appendShared(&m.text, old, delta)
	if len(old) > 0 && unsafe.StringData(m.Content) != unsafe.StringData(old) {
		m.moveParts(old)
	}
	n := len(m.Parts)
	if n == 0 || m.Parts[n-1].Type != PartText || !m.Parts[n-1].Streaming {
		m.Parts = append(m.Parts, Part{Type: PartText, Text: m.Content[len(old):], Streaming: true})
		return
	}
	// The streaming part is the content's last text: its end, when the
	// content holds it there (it always does when made by AppendText; the
	// compare costs nothing when both are the same bytes).
	t := m.Parts[n-1].Text
	if len(t) <= len(old) && old[len(old)-len(t):] == t {
		m.Parts[n-1].Text = m.Content[len(old)-len(t):]
	} else {
		m.Parts[n-1].Text = t + delta
	}
}

// ApplyTool applies a change of a tool call to a streaming message: p is a
// tool-call part that names the call by CallID. If the message has that
// call, its status becomes p's and its tool name, args, result and error
// become p's where p sets them; otherwise p is added as a new part, which
// closes the streaming text part, so that text after the tool starts a new
// part. It reports whether the part is new. The server assembles messages
// with it and clients fold part.updated events with it, so the two never
// disagree.
func (m *Message) ApplyTool(p Part) bool {
	for i := range m.Parts {
		q := &m.Parts[i]
		if q.Type == PartToolCall && q.CallID == p.CallID {
			if p.Status != "" {
				q.Status = p.Status
			}
			if p.ToolName != "" {
				q.ToolName = p.ToolName
			}
			if p.Args != nil {
				q.Args = p.Args
			}
			if p.Result != nil {
				q.Result = p.Result
			}
			if p.Error != "" {
				q.Error = p.Error
			}
			return false
		}
	}
	for i := range m.Parts {
		m.Parts[i].Streaming = false
	}
	p.Type, p.Streaming = PartToolCall, false
	m.Parts = append(m.Parts, p)
	return true
}

// Size is what a message's size limit counts, in bytes: its text (its
// content, or its text parts if they hold more), the args, results and
// errors of its tool calls, the messages of its error parts, and its
// metadata. Ids, names and times are bounded on their own and not counted.
func (m *Message) Size() int {
	text, n := 0, len(m.Metadata)
	for i := range m.Parts {
		text += len(m.Parts[i].Text)
		n += PartBytes(m.Parts[i])
	}
	return n + max(text, len(m.Content))
}

// PartBytes is what a part adds to its message's Size besides text: its
// args, result, error and message, and an input request's title, detail,
// schema, options and answer.
func PartBytes(p Part) int {
	n := len(p.Args) + len(p.Result) + len(p.Error) + len(p.Message)
	if p.Type == PartInputRequest {
		n += len(p.Title) + len(p.Detail) + len(p.Schema) + len(p.Answer)
		for _, o := range p.Options {
			n += len(o.Label) + len(o.Description)
		}
	}
	return n
}

// TextContent returns the plain text of parts: its text parts, concatenated.
func TextContent(parts []Part) string {
	n, texts, last := 0, 0, ""
	for _, p := range parts {
		if p.Type == PartText {
			n, texts, last = n+len(p.Text), texts+1, p.Text
		}
	}
	if texts <= 1 {
		return last // the one text part's string, shared: strings do not change
	}
	var b strings.Builder
	b.Grow(n)
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
// A–Z a–z 0–9 . _ : -, and neither "." nor "..", which a URL path cannot
// carry as a segment (clients and proxies resolve them as dot segments), so
// that every id can be named in a path.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !IDChar(s[i]) {
			return false
		}
	}
	return true
}

// IDChar reports whether c may appear in an id: A–Z a–z 0–9 . _ : -
func IDChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '.', c == '_', c == ':', c == '-':
		return true
	}
	return false
}

// Delivery is a finalized reply on its way to the channel its prompt came
// from (channel auto-reply). It is written with the reply, in the same
// transaction, and delivered at least once, with its ID as the webhook's
// idempotency key; or, once it cannot be, given up (Status failed), and
// kept for a while to be looked at.
type Delivery struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversationId"`
	MessageID      string  `json:"messageId"`
	Channel        Channel `json:"channel"`
	Content        string  `json:"content"`
	// MessageStatus is how the reply ended: complete, error or canceled
	// (empty in rows written before it was kept, which were all complete).
	MessageStatus MessageStatus `json:"messageStatus,omitempty"`
	// Status is DeliveryPending ("" in rows written before it existed),
	// DeliveryDelivered or DeliveryFailed.
	Status        DeliveryStatus `json:"status,omitempty"`
	Attempts      int            `json:"attempts"`
	NextAttemptAt Time           `json:"nextAttemptAt"`
	DeliveredAt   Time           `json:"deliveredAt"`
	// GaveUpAt is when a failed delivery was given up.
	GaveUpAt  Time   `json:"gaveUpAt"`
	LastError string `json:"lastError,omitempty"`
	CreatedAt Time   `json:"createdAt"`
}

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"   // to be attempted (again)
	DeliveryDelivered DeliveryStatus = "delivered" // the webhook took it
	DeliveryFailed    DeliveryStatus = "failed"    // given up: it could not be delivered
)

// Valid reports whether s is a known status.
func (s DeliveryStatus) Valid() bool {
	return s == DeliveryPending || s == DeliveryDelivered || s == DeliveryFailed
}
