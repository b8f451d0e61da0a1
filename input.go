package parley

import (
	"encoding/json"
	"slices"
)

// Input requests: an agent stops mid-answer to ask a person, "may I run
// this?" (an approval) or "which of these?" (a question), and goes on when
// answered. A request is a part of the asking agent's streaming message
// (type input-request), opened by a part.updated event and ended by an
// input.answered event; the message stays open, and its turn the agent's,
// while it waits.

// PartInputRequest is the type of an input-request part.
const PartInputRequest = "input-request"

// Input request kinds.
const (
	InputApproval = "approval"
	InputQuestion = "question"
)

// Input request statuses.
const (
	InputStatusPending  = "pending"
	InputStatusAnswered = "answered"
	InputStatusExpired  = "expired"
	InputStatusCanceled = "canceled"
)

// Event types of input requests (a request opens with a part.updated event
// whose part is an input-request).
const (
	// EventInputAnswered ends an input request: answered, expired or
	// canceled; Data is InputAnswered.
	EventInputAnswered = "input.answered"
	// EventInputAcked records that the asking runner has the outcome of an
	// input request, so that it is not sent to it again; Data is InputAcked.
	EventInputAcked = "input.acked"
)

// InputOption is one choice of a question.
type InputOption struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// InputRequest is what an agent asks: the fields of an input-request part
// that the asker sets. Kind is approval or question; an approval may name
// the tool call it is about (ToolCallID, ToolName, Args). Schema is the
// JSON Schema of the answer; without one, an approval's answer is
// {"approved", "reason"?} and a question's is {"choices": [labels]} or
// {"text"}. Answerers are members, besides those always allowed, who may
// answer.
type InputRequest struct {
	RequestID  string          `json:"requestId"`
	Kind       string          `json:"kind"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Title      string          `json:"title"`
	Detail     string          `json:"detail,omitempty"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	Options    []InputOption   `json:"options,omitempty"`
	Multiple   bool            `json:"multiple,omitempty"`
	ExpiresAt  Time            `json:"expiresAt,omitzero"`
	Answerers  []string        `json:"answerers,omitempty"`
}

// Part returns the pending input-request part that opens r.
func (r InputRequest) Part() Part {
	return Part{Type: PartInputRequest, RequestID: r.RequestID, Kind: r.Kind, ToolCallID: r.ToolCallID, ToolName: r.ToolName,
		Args: r.Args, Title: r.Title, Detail: r.Detail, Schema: r.Schema, Options: r.Options, Multiple: r.Multiple,
		ExpiresAt: r.ExpiresAt, Answerers: r.Answerers, Status: InputStatusPending}
}

// Approval is the answer to an approval request.
type Approval struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// InputAnswered is the data of an input.answered event: how an input
// request ended. Answer and AnsweredBy are set when it was answered;
// Reason says why it was canceled or expired.
type InputAnswered struct {
	MessageID  string          `json:"messageId"`
	RequestID  string          `json:"requestId"`
	Status     string          `json:"status"`
	Answer     json.RawMessage `json:"answer,omitempty"`
	AnsweredBy string          `json:"answeredBy,omitempty"`
	AnsweredAt Time            `json:"answeredAt"`
	Reason     string          `json:"reason,omitempty"`
	// Checkpoint is true when the message's row was rewritten with this
	// event, so that the row is complete as of this event's seq.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// InputAcked is the data of an input.acked event.
type InputAcked struct {
	MessageID string `json:"messageId"`
	RequestID string `json:"requestId"`
}

// Input is an input request as readers list it: its part, with the
// message and agent it belongs to.
type Input struct {
	ConversationID string `json:"conversationId"`
	MessageID      string `json:"messageId"`
	AgentID        string `json:"agentId"`
	Part
}

// PendingInput is an input request still pending, as a conversation's head
// lists it.
type PendingInput struct {
	RequestID string `json:"requestId"`
	MessageID string `json:"messageId"`
	AgentID   string `json:"agentId"`
	Kind      string `json:"kind"`
	Title     string `json:"title"`
	ExpiresAt Time   `json:"expiresAt,omitzero"`
}

// ApplyPart applies a part.updated event's part to a streaming message:
// an input-request part by ApplyInput, any other (a tool call) by
// ApplyTool. It reports whether the part is new.
func (m *Message) ApplyPart(p Part) bool {
	if p.Type == PartInputRequest {
		return m.ApplyInput(p)
	}
	return m.ApplyTool(p)
}

// ApplyInput adds an input-request part to a streaming message, or
// replaces the one with its request id; it closes the streaming text part
// as a tool call does. It reports whether the part is new.
func (m *Message) ApplyInput(p Part) bool {
	defer m.noteAwaiting()
	if i := m.inputPart(p.RequestID); i >= 0 {
		m.Parts[i] = p
		return false
	}
	for i := range m.Parts {
		m.Parts[i].Streaming = false
	}
	p.Streaming = false
	m.Parts = append(m.Parts, p)
	return true
}

// ApplyInputAnswered applies the end of an input request to its message:
// the part's status, answer, who answered and when, and why it ended. It
// reports whether the message has that request.
func (m *Message) ApplyInputAnswered(a InputAnswered) bool {
	i := m.inputPart(a.RequestID)
	if i < 0 {
		return false
	}
	p := &m.Parts[i]
	p.Status, p.Answer, p.AnsweredBy, p.AnsweredAt, p.Reason = a.Status, a.Answer, a.AnsweredBy, a.AnsweredAt, a.Reason
	m.noteAwaiting()
	return true
}

// inputPart returns the index of the input-request part with id, or -1.
func (m *Message) inputPart(id string) int {
	return slices.IndexFunc(m.Parts, func(p Part) bool { return p.Type == PartInputRequest && p.RequestID == id })
}

// noteAwaiting sets AwaitingInput: whether an input request of the message
// is pending.
func (m *Message) noteAwaiting() {
	m.AwaitingInput = slices.ContainsFunc(m.Parts, func(p Part) bool { return p.Type == PartInputRequest && p.Status == InputStatusPending })
}
