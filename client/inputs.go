package client

// Input requests: a runner asks a person for an approval or an answer in
// the middle of its message (AskApproval, AskQuestion), and anyone allowed
// answers over HTTP (AnswerInput). The runner's call waits for the
// server's input.answered frame for its request, which the connection's
// reader hands to it (never to Next), then acks it (input.ack).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
)

// ErrInputExpired is what AskQuestion returns when its request expired
// unanswered (AskApproval takes an expired approval for a denial).
var ErrInputExpired = errors.New("client: the input request expired unanswered")

// ErrInputCanceled is what AskApproval and AskQuestion return, wrapped with
// the reason (stopped, steered, reverted, aborted, finalized), when the
// request was canceled before anyone answered it: the answer it belongs to
// was stopped or ended.
var ErrInputCanceled = errors.New("client: the input request was canceled")

// inputFrame is an input.answered or input.pending frame: the outcome of a
// request, or a request still pending (the fields of its part), with the
// message that asked it.
type inputFrame struct {
	Type           string `json:"type"`
	ConversationID string `json:"conversationId,omitempty"`
	TurnID         string `json:"turnId"`
	parley.Part
}

// inputs is what a Runner's connections share about input requests: the
// calls waiting for an outcome, and the outcomes already handed over.
type inputs struct {
	waiting   map[string]chan parley.InputAnswered // by inputKey
	delivered map[string]bool                      // outcomes handed over, whose ack may have been lost
	order     []string                             // of delivered, oldest first, to bound it
}

// maxDelivered bounds how many handed-over outcomes a runner remembers, to
// ack again one the server sends again.
const maxDelivered = 1024

// inputKey names a request on a runner: its conversation (on an agent-wide
// runner; request ids are unique in a conversation) and its id.
func inputKey(conversationID, requestID string) string { return conversationID + "\x00" + requestID }

// AskApproval asks for an approval in message messageID (open, written by
// this runner) and waits for the answer: it sends the request (kind
// approval; a RequestID is made if req has none) and returns once someone
// answered it, acking the outcome. The message stays open, awaiting input,
// until then. An expired request is a denial, parley.Approval{Reason: "expired"}.
// A canceled one (the answer was stopped or steered) returns a denial with
// the reason and an error wrapping ErrInputCanceled. When ctx ends first,
// it returns ctx's error; the request stays pending (its outcome comes to
// Next as an "input.answered" Push). A lost connection does not end it:
// it reconnects as Serve does (the request is sent again only if State
// says the server does not have it), and the server sends the outcome
// again on the new connection.
func (r *Runner) AskApproval(ctx context.Context, messageID string, req parley.InputRequest) (parley.Approval, error) {
	req.Kind = parley.InputApproval
	out, err := r.ask(ctx, messageID, req)
	if err != nil {
		return parley.Approval{}, err
	}
	switch out.Status {
	case parley.InputStatusAnswered:
		var a parley.Approval
		if err := json.Unmarshal(out.Answer, &a); err != nil {
			return parley.Approval{}, fmt.Errorf("the answer to input request %s is not an approval: %w", out.RequestID, err)
		}
		return a, nil
	case parley.InputStatusExpired:
		return parley.Approval{Reason: parley.InputStatusExpired}, nil
	case parley.InputStatusCanceled:
		return parley.Approval{Reason: out.Reason}, fmt.Errorf("%w (%s)", ErrInputCanceled, out.Reason)
	}
	return parley.Approval{}, fmt.Errorf("input request %s ended %q", out.RequestID, out.Status)
}

// AskQuestion asks a question in message messageID (open, written by this
// runner) and waits for its answer, as AskApproval does: the answer is what
// the person sent ({"choices": [...]} or {"text": "..."} for a question
// with options, or anything valid against req.Schema). An expired request
// returns ErrInputExpired, a canceled one an error wrapping
// ErrInputCanceled.
func (r *Runner) AskQuestion(ctx context.Context, messageID string, req parley.InputRequest) (json.RawMessage, error) {
	req.Kind = parley.InputQuestion
	out, err := r.ask(ctx, messageID, req)
	if err != nil {
		return nil, err
	}
	switch out.Status {
	case parley.InputStatusAnswered:
		return out.Answer, nil
	case parley.InputStatusExpired:
		return nil, ErrInputExpired
	case parley.InputStatusCanceled:
		return nil, fmt.Errorf("%w (%s)", ErrInputCanceled, out.Reason)
	}
	return nil, fmt.Errorf("input request %s ended %q", out.RequestID, out.Status)
}

// AckInput tells the server the runner has the outcome of request
// requestID (input.ack), so that it is not sent again. AskApproval and
// AskQuestion ack what they return; call it for an "input.answered" Push
// (the outcome of a request asked before a restart) once it is handled.
func (r *Runner) AckInput(ctx context.Context, requestID string) error {
	_, err := r.do(ctx, map[string]any{"type": "input.ack", "requestId": requestID})
	return err
}

// WithdrawInput takes back request requestID, still pending, that no longer
// needs an answer (it was answered some other way): the server ends it
// canceled with reason ("withdrawn" if empty), and the call waiting for it
// gets that outcome. A request that has ended is left as it is.
func (r *Runner) WithdrawInput(ctx context.Context, requestID, reason string) error {
	f := map[string]any{"type": "input.withdraw", "requestId": requestID}
	if reason != "" {
		f["reason"] = reason
	}
	_, err := r.do(ctx, f)
	return err
}

// ask sends the request and waits for its outcome, then acks it.
func (r *Runner) ask(ctx context.Context, messageID string, req parley.InputRequest) (parley.InputAnswered, error) {
	if req.RequestID == "" {
		req.RequestID = "req_" + uuid.NewString()
	}
	key := inputKey(r.scope, req.RequestID)
	outcome := make(chan parley.InputAnswered, 1)
	r.mu.Lock()
	if r.inputs.waiting[key] != nil {
		r.mu.Unlock()
		return parley.InputAnswered{}, fmt.Errorf("input request %s is being asked already", req.RequestID)
	}
	r.inputs.waiting[key] = outcome
	r.mu.Unlock()
	ack := func() {
		// Acked even if ctx ends now (an abort comes with a canceled
		// outcome), on a best-effort basis: if the ack is lost, the
		// server sends the outcome again, and the reader acks it then.
		ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		_ = r.AckInput(ackCtx, req.RequestID)
		cancel()
	}
	forget := func() {
		r.mu.Lock()
		mine := r.inputs.waiting[key] == outcome
		if mine {
			delete(r.inputs.waiting, key)
		}
		r.mu.Unlock()
		if !mine { // the reader handed the outcome over meanwhile: take it
			<-outcome
			ack()
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		forget()
		return parley.InputAnswered{}, err
	}
	var frame map[string]any
	_ = json.Unmarshal(b, &frame)
	frame["type"], frame["turnId"] = "message.part.input-request", messageID
	asked := func(m *parley.Message) bool {
		if m == nil {
			return false
		}
		for _, p := range m.Parts {
			if p.Type == parley.PartInputRequest && p.RequestID == req.RequestID {
				return true
			}
		}
		return false
	}
	if _, err := r.deliver(ctx, frame, messageID, asked); err != nil {
		forget()
		return parley.InputAnswered{}, err
	}
	for {
		c := r.current()
		select {
		case out := <-outcome:
			ack()
			return out, nil
		case <-c.done:
			// Lost: the server sends the outcome again on the new connection.
			if c.fatal != nil {
				forget()
				return parley.InputAnswered{}, c.fatal
			}
			if _, err := r.reconnect(ctx, c); err != nil {
				forget()
				return parley.InputAnswered{}, err
			}
		case <-ctx.Done():
			forget()
			return parley.InputAnswered{}, ctx.Err()
		case <-r.shut:
			forget()
			return parley.InputAnswered{}, ErrRunnerClosed
		}
	}
}

// input routes an input.answered or input.pending frame that came on c:
// to the call waiting for it, or to Next as a Push when none does. An
// outcome handed over already (its ack was lost) is acked again and
// dropped; a pending request a call waits for is dropped. It reports
// whether the frame became a Push, which it then returns.
func (l *link) input(c *runnerConn, data []byte) (Push, bool) {
	var f inputFrame
	if err := json.Unmarshal(data, &f); err != nil || f.RequestID == "" {
		return Push{}, false
	}
	scope := ""
	if l.wide {
		scope = f.ConversationID
	}
	key := inputKey(scope, f.RequestID)
	l.mu.Lock()
	waiter := l.inputs.waiting[key]
	switch {
	case f.Type == "input.pending" && waiter != nil:
		l.mu.Unlock()
		return Push{}, false
	case f.Type == "input.answered" && waiter != nil:
		delete(l.inputs.waiting, key)
		l.remember(key)
		l.mu.Unlock()
		waiter <- answeredOf(f) // buffered, and only this frame sends on it
		return Push{}, false
	case f.Type == "input.answered" && l.inputs.delivered[key]:
		l.mu.Unlock()
		go l.reack(c, scope, f.RequestID)
		return Push{}, false
	}
	l.mu.Unlock()
	p := Push{Type: f.Type, MessageID: f.TurnID, ConversationID: f.ConversationID}
	if f.Type == "input.answered" {
		a := answeredOf(f)
		p.Answered = &a
	} else {
		part := f.Part
		part.Type = parley.PartInputRequest
		p.Request = &parley.Input{ConversationID: f.ConversationID, MessageID: f.TurnID, Part: part}
	}
	return p, true
}

// answeredOf is the outcome an input.answered frame gives.
func answeredOf(f inputFrame) parley.InputAnswered {
	return parley.InputAnswered{MessageID: f.TurnID, RequestID: f.RequestID, Status: f.Status, Answer: f.Answer,
		AnsweredBy: f.AnsweredBy, AnsweredAt: f.AnsweredAt, Reason: f.Reason}
}

// remember notes an outcome handed over; l.mu is held.
func (l *link) remember(key string) {
	if len(l.inputs.order) >= maxDelivered {
		delete(l.inputs.delivered, l.inputs.order[0])
		l.inputs.order = l.inputs.order[1:]
	}
	l.inputs.delivered[key] = true
	l.inputs.order = append(l.inputs.order, key)
}

// ackTimeout bounds the wait for the server's answer to an input.ack that
// no caller's ctx bounds.
const ackTimeout = 30 * time.Second

// reack acks again, on c, an outcome the server sent again.
func (l *link) reack(c *runnerConn, scope, requestID string) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	r := &Runner{link: l, scope: scope}
	_, _ = r.exchange(ctx, c, map[string]any{"type": "input.ack", "requestId": requestID})
}

// Inputs lists the input requests of a conversation (GET
// /v1/conversations/{id}/inputs), oldest first: status "pending" (the
// default when empty), or "open", which adds those that ended but whose
// outcome the asking runner has not taken yet.
func (c *Client) Inputs(ctx context.Context, conversationID, status string) ([]parley.Input, error) {
	path := convPath(conversationID, "/inputs")
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	out, err := call[parley.InputList](ctx, c, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return out.Inputs, nil
}

// AnswerInput answers input request requestID of a conversation (POST
// /v1/conversations/{id}/inputs/{requestId}) as agentID (needed only with
// an admin token or on an open server; "" otherwise) and returns the
// request as it now is. answer is the answer's JSON: a parley.Approval for
// an approval, {"choices": [...]} or {"text": "..."} for a question with
// options, or what its schema asks for. The same answer again returns the
// first result; another one after it, or an answer to a request that
// expired or was canceled, is input_ended (409); one that does not fit the
// schema, invalid_value (422); a request the caller may not answer, 403;
// an unknown one, 404.
func (c *Client) AnswerInput(ctx context.Context, conversationID, requestID, agentID string, answer any) (*parley.Input, error) {
	raw, err := json.Marshal(answer)
	if err != nil {
		return nil, err
	}
	res, err := call[parley.AnswerInputResult](ctx, c, http.MethodPost, convPath(conversationID, "/inputs/"+url.PathEscape(requestID)),
		parley.AnswerInputRequest{AgentID: agentID, Answer: raw})
	if err != nil {
		return nil, err
	}
	return &res.Input, nil
}

// isInputFrame reports whether a frame the server sends is about an input
// request.
func isInputFrame(typ string) bool { return typ == "input.answered" || typ == "input.pending" }

// AskApproval asks for an approval in the answer's message (created first
// if none is open) and waits for the outcome, as Runner.AskApproval does;
// the handler's ctx ending (an abort) ends the wait. The other calls of
// the Reply are not held up meanwhile.
func (rp *Reply) AskApproval(ctx context.Context, req parley.InputRequest) (parley.Approval, error) {
	msg, err := rp.asking(ctx)
	if err != nil {
		return parley.Approval{}, err
	}
	return rp.r.AskApproval(ctx, msg, req)
}

// AskQuestion asks a question in the answer's message (created first if
// none is open) and waits for the answer, as Runner.AskQuestion does.
func (rp *Reply) AskQuestion(ctx context.Context, req parley.InputRequest) (json.RawMessage, error) {
	msg, err := rp.asking(ctx)
	if err != nil {
		return nil, err
	}
	return rp.r.AskQuestion(ctx, msg, req)
}

// asking opens the answer's message and returns its id.
func (rp *Reply) asking(ctx context.Context) (string, error) {
	var msg string
	err := rp.with(ctx, func() error {
		if err := rp.open(); err != nil {
			return err
		}
		msg = rp.msg
		return nil
	})
	return msg, err
}
