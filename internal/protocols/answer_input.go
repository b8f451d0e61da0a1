package protocols

import (
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

// Input requests in an answer: an agent that stops mid-answer to ask a
// person (an approval of a tool call, or a question) writes an
// input-request part into its streaming message (a part.updated event),
// and the request ends with an input.answered event (answered, expired or
// canceled); the message stays open meanwhile. The fold keeps the
// answer's requests in the order they were opened and steps their opening
// (stepInput) and their end (stepInputEnd), each once, so that every
// protocol shows them as the log has them.
//
// A request opened closes what streams before it, as a tool call does:
// the text part it follows ends, and a tool call whose input was not yet
// known has it now. An approval about a tool call that the message does not
// hold (its runner asked before writing the call) brings the call first,
// from the request's toolName and args, so that every protocol has a call
// to attach the approval to.

// Kinds and statuses of input requests (package parley's names).
const (
	inputApproval = parley.InputApproval
	inputQuestion = parley.InputQuestion
	inputPending  = parley.InputStatusPending
	inputAnswered = parley.InputStatusAnswered

	partInputRequest   = parley.PartInputRequest
	eventInputAnswered = parley.EventInputAnswered
)

// inputReq is an input-request part as the log carries it (a part.updated
// event's part, or a part of a message event), with how it ended.
type inputReq struct {
	Type       string          `json:"type,omitempty"`
	RequestID  string          `json:"requestId"`
	Kind       string          `json:"kind"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Title      string          `json:"title,omitempty"`
	Detail     string          `json:"detail,omitempty"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	Options    json.RawMessage `json:"options,omitempty"`
	Multiple   bool            `json:"multiple,omitempty"`
	ExpiresAt  string          `json:"expiresAt,omitempty"`
	Status     string          `json:"status"`
	Answer     json.RawMessage `json:"answer,omitempty"`
	AnsweredBy string          `json:"answeredBy,omitempty"`
	AnsweredAt string          `json:"answeredAt,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// aboutCall reports whether r is the approval of a tool call.
func (r *inputReq) aboutCall() bool { return r.Kind == inputApproval && r.ToolCallID != "" }

// ended reports whether the request is no longer pending.
func (r *inputReq) ended() bool { return r.Status != "" && r.Status != inputPending }

// denied reports whether an approval ended without being approved: denied,
// expired (an expired approval is a denial), or canceled.
func (r *inputReq) denied() bool {
	if !r.ended() {
		return false
	}
	if r.Status != inputAnswered {
		return true
	}
	var a struct {
		Approved bool `json:"approved"`
	}
	return json.Unmarshal(r.Answer, &a) != nil || !a.Approved
}

// inputEnded is the data of an input.answered event.
type inputEnded struct {
	MessageID  string          `json:"messageId"`
	RequestID  string          `json:"requestId"`
	Status     string          `json:"status"`
	Answer     json.RawMessage `json:"answer,omitempty"`
	AnsweredBy string          `json:"answeredBy,omitempty"`
	AnsweredAt string          `json:"answeredAt,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// inputSent is what was stepped of one request.
type inputSent struct {
	req          *inputReq
	opened, done bool
}

// applyPartUpdate folds a part.updated event of the answer's message: an
// input request, or a tool call.
func (a *answerState) applyPartUpdate(data json.RawMessage, out []step) []step {
	var u struct {
		MessageID string          `json:"messageId"`
		Part      json.RawMessage `json:"part"`
	}
	if a.m == nil || json.Unmarshal(data, &u) != nil || u.MessageID != a.m.ID {
		return out
	}
	var kind struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(u.Part, &kind) != nil {
		return out
	}
	if kind.Type == partInputRequest {
		var r inputReq
		if json.Unmarshal(u.Part, &r) != nil || r.RequestID == "" {
			return out
		}
		if a.input(r.RequestID) == nil {
			// The message holds its requests among its parts, as its row
			// does, so that the parts after it keep their place.
			defer func() { a.m.Parts = append(a.m.Parts, parley.Part{Type: partInputRequest, RequestID: r.RequestID}) }()
		}
		return a.applyInput(&r, out)
	}
	var p parley.Part
	if json.Unmarshal(u.Part, &p) != nil {
		return out
	}
	a.m.ApplyTool(p)
	return a.diff(out)
}

// applyInputEnded folds an input.answered event of the answer's message.
func (a *answerState) applyInputEnded(data json.RawMessage, out []step) []step {
	var e inputEnded
	if a.m == nil || json.Unmarshal(data, &e) != nil || e.MessageID != a.m.ID {
		return out
	}
	in := a.input(e.RequestID)
	if in == nil {
		return out
	}
	r := *in.req
	r.Status, r.Answer, r.AnsweredBy, r.AnsweredAt, r.Reason = e.Status, e.Answer, e.AnsweredBy, e.AnsweredAt, e.Reason
	return a.applyInput(&r, out)
}

// applyMessageInputs folds the input-request parts of a message event
// (a message's row carries its requests as they are).
func (a *answerState) applyMessageInputs(data json.RawMessage, out []step) []step {
	var m struct {
		Parts []inputReq `json:"parts"`
	}
	if json.Unmarshal(data, &m) != nil {
		return out
	}
	for i := range m.Parts {
		if r := &m.Parts[i]; r.Type == partInputRequest && r.RequestID != "" {
			out = a.applyInput(r, out)
		}
	}
	return out
}

// input returns what was stepped of request id, or nil.
func (a *answerState) input(id string) *inputSent {
	i := slices.IndexFunc(a.inputs, func(s *inputSent) bool { return s.req.RequestID == id })
	if i < 0 {
		return nil
	}
	return a.inputs[i]
}

// applyInput folds request r as it now is: opened (closing what streams
// before it) and, once it ended, ended.
func (a *answerState) applyInput(r *inputReq, out []step) []step {
	if a.done {
		return out
	}
	in := a.input(r.RequestID)
	if in == nil {
		in = &inputSent{}
		a.inputs = append(a.inputs, in)
	}
	c := *r
	if in.req != nil && in.req.ended() && !c.ended() {
		return out // a row older than the end already folded
	}
	in.req = &c
	if !in.opened {
		in.opened = true
		for i := range a.m.Parts {
			a.m.Parts[i].Streaming = false
		}
		out = a.closeParts(out)
		out = a.callOf(&c, out)
		opened := c
		opened.Status, opened.Answer, opened.AnsweredBy, opened.AnsweredAt, opened.Reason = inputPending, nil, "", "", ""
		out = append(out, step{kind: stepInput, id: c.RequestID, input: &opened})
	}
	if c.ended() && !in.done {
		in.done = true
		out = append(out, step{kind: stepInputEnd, id: c.RequestID, input: &c})
		if t := a.tools[c.ToolCallID]; c.Kind == inputApproval && t != nil && !t.output && c.denied() {
			// A call denied has no outcome: it is not run.
			t.output = true
			out = append(out, step{kind: stepToolDenied, id: c.ToolCallID, input: &c})
		}
	}
	return out
}

// callOf appends the steps of the tool call an approval is about when the
// message does not hold it yet: its start and its input, from the request.
func (a *answerState) callOf(r *inputReq, out []step) []step {
	if !r.aboutCall() || a.tools[r.ToolCallID] != nil {
		return out
	}
	a.tools[r.ToolCallID] = &toolSent{input: true, synthetic: true}
	name := r.ToolName
	if name == "" {
		name = "approval"
	}
	p := &parley.Part{Type: parley.PartToolCall, CallID: r.ToolCallID, ToolName: name, Args: r.Args, Status: parley.ToolPending}
	return append(out, step{kind: stepToolStart, id: r.ToolCallID, part: p}, step{kind: stepToolInput, id: r.ToolCallID, part: p})
}

// closeCalls ends, as the answer ends, the calls approvals brought that
// the message never held: an error with no outcome, as the calls a
// message leaves running end.
func (a *answerState) closeCalls(out []step) []step {
	if a.m == nil {
		return out
	}
	for _, in := range a.inputs {
		id := in.req.ToolCallID
		t := a.tools[id]
		if t == nil || !t.synthetic || t.output || slices.ContainsFunc(a.m.Parts, func(p parley.Part) bool { return p.Type == parley.PartToolCall && p.CallID == id }) {
			continue
		}
		t.output = true
		out = append(out, step{kind: stepToolError, id: id, part: &parley.Part{Type: parley.PartToolCall, CallID: id, Status: parley.ToolError, Error: "the call ended with no outcome"}})
	}
	return out
}

// pendingInputs returns the answer's requests that are pending as far as
// the log was folded, in the order they were opened.
func (a *answerState) pendingInputs() []*inputReq {
	var out []*inputReq
	for _, in := range a.inputs {
		if !in.req.ended() {
			out = append(out, in.req)
		}
	}
	return out
}

// pendingAbout returns the ids of the answer's requests pending as far as
// the log was folded that want reports true for.
func (a *answerState) pendingAbout(want func(*inputReq) bool) []string {
	var ids []string
	for _, r := range a.pendingInputs() {
		if want(r) {
			ids = append(ids, r.RequestID)
		}
	}
	return ids
}
