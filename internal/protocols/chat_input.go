package protocols

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Input requests in the AI SDK's chat. Every request of the answer is a data
// part `data-input-request` (its id the request's id, its data the
// request: sent when it opens, and again, replacing it, when it ends). An
// approval of a tool call is also the SDK's own tool approval: a
// `tool-approval-request` chunk after the call's input, and the stream
// pauses there (finish, then [DONE]) while the approval is pending, as the
// SDK expects of an approval. The page answers with
// addToolApprovalResponse, and the next POST /v1/chat carries the answer's
// message with the call in state approval-responded: the adapter answers
// the request and streams the rest of the same answer, from where the
// paused stream stopped. A denied (or expired) approval is
// `tool-output-denied`. Questions do not pause the stream: the page
// answers them with POST /v1/conversations/{id}/inputs/{requestId}, and
// the stream goes on.

// uiApproval is a tool part's approval as the SDK sends it back.
type uiApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason"`
}

// approvalAnswer is an approval's answer as Parley takes it.
type approvalAnswer struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// approvals returns the approvals answered in message m, by request id.
func (m *uiMessage) approvals() (ids []string, answers map[string]approvalAnswer) {
	answers = map[string]approvalAnswer{}
	for _, p := range m.Parts {
		if p.State != "approval-responded" || p.Approval == nil || p.Approval.Approved == nil {
			continue
		}
		if _, ok := answers[p.Approval.ID]; !ok {
			ids = append(ids, p.Approval.ID)
		}
		answers[p.Approval.ID] = approvalAnswer{Approved: *p.Approval.Approved, Reason: p.Approval.Reason}
	}
	return ids, answers
}

// chatApproved serves a POST /v1/chat whose last message is the answer's,
// with approvals answered: it answers them, as act, and streams the rest
// of the answer. Nothing is answered unless every approval named is one of
// the chat's requests and an answer is under way to go on with.
func (s *Server) chatApproved(ctx context.Context, w http.ResponseWriter, r *http.Request, act conv.Actor, req *chatRequest) {
	ids, answers := req.Messages.last.approvals()
	var (
		msg string // the message that asks them
		err error
	)
	switch {
	case len(ids) == 0:
		err = parley.Errorf(parley.EINVALIDVALUE, "the last message is the %q's with no approval answered (a tool part in state approval-responded); it must be the user's question", req.Messages.last.Role)
	case req.Trigger == triggerRegenerate:
		err = parley.Errorf(parley.EINVALIDVALUE, "a regenerate's last message is the user's question, not the answer's")
	case len(ids) > maxResumeEntries:
		err = parley.Errorf(parley.EINVALIDVALUE, "the last message answers %d approvals; at most %d", len(ids), maxResumeEntries)
	case slices.ContainsFunc(ids, func(id string) bool { return !parley.ValidID(id) }):
		err = parley.Errorf(parley.EINVALIDVALUE, "an approval's id is not an input request's id (1-128 characters of A-Z a-z 0-9 . _ : -)")
	default:
		err = s.eng.Require(r.Context(), req.ID, func(st conv.State) error { return st.CanWrite(act) })
	}
	if err == nil {
		msg, err = s.checkApprovals(r.Context(), req.ID, ids, answers)
	}
	var (
		a    *answerState
		from parley.Position
	)
	if err == nil {
		a, from, err = s.answerOf(r.Context(), req.ID, act, msg)
	}
	for i := 0; err == nil && i < len(ids); i++ {
		b, _ := json.Marshal(answers[ids[i]])
		err = s.host.AnswerInput(r.Context(), act, req.ID, ids[i], b)
	}
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	s.streamChat(ctx, w, req.ID, a, from, newSkipper(ids))
}

// checkApprovals checks that every id is an approval of conversation id
// that its answer fits, and returns the message that asks the last.
func (s *Server) checkApprovals(ctx context.Context, id string, ids []string, answers map[string]approvalAnswer) (string, error) {
	inputs, err := s.host.Inputs(ctx, id, true)
	if err != nil {
		return "", err
	}
	msg := ""
	for _, want := range ids {
		i := slices.IndexFunc(inputs, func(in Input) bool { return in.RequestID == want })
		switch {
		case i < 0:
			return "", parley.Errorf(parley.ENOTFOUND, "approval %q is not an input request of chat %s", want, id)
		case inputs[i].Kind != inputApproval:
			return "", parley.Errorf(parley.EINVALIDVALUE, "input request %q is a %s, not an approval: answer it with POST /v1/conversations/%s/inputs/%s", want, inputs[i].Kind, id, want)
		}
		b, _ := json.Marshal(answers[want])
		if err := fits(&inputs[i], b); err != nil {
			return "", err
		}
		msg = inputs[i].MessageID
	}
	return msg, nil
}

// fits checks, before anything is answered, that answer fits request in
// if it is pending (the answer of one that ended is the core's to compare).
func fits(in *Input, answer json.RawMessage) error {
	if in.Status != inputPending || in.Part.RequestID == "" {
		return nil
	}
	if _, err := conv.CheckAnswer(in.Part, answer); err != nil {
		return parley.Errorf(parley.ErrorCode(err), "input request %s: %s", in.RequestID, parley.ErrorMessage(err))
	}
	return nil
}

// answerOf finds the answer that message id of conversation convID (one
// that asks an input request) belongs to, and the position to follow it
// from: the answer to the question it replies to if act asked it (its
// retries followed), else the message alone.
func (s *Server) answerOf(ctx context.Context, convID string, act conv.Actor, id string) (*answerState, parley.Position, error) {
	m, err := s.rd.StoredMessage(ctx, convID, id)
	if err != nil {
		return nil, parley.Position{}, err
	}
	for _, prompt := range []string{m.ReplyTo, m.TurnID} {
		if prompt == "" || prompt == m.ID {
			continue
		}
		from, ok, err := s.rd.AskedBefore(ctx, convID, prompt, act.AgentID)
		if err != nil {
			return nil, parley.Position{}, err
		}
		if ok {
			return newAnswer(prompt), from, nil
		}
	}
	return answerOfMessage(m.ID), parley.Position{Seq: m.Seq - 1}, nil
}

// pendingNow reports whether any of the requests ids of conversation id is
// pending now (not only as far as the log was folded).
func (s *Server) pendingNow(ctx context.Context, id string, ids []string) (bool, error) {
	inputs, err := s.host.Inputs(ctx, id, false)
	if err != nil {
		return false, err
	}
	for _, in := range inputs {
		if in.Status == inputPending && slices.Contains(ids, in.RequestID) {
			return true, nil
		}
	}
	return false, nil
}

// chatPause ends the stream (finish, [DONE]; errPaused) if the answer, as
// far as it was folded, has an approval of a tool call that is pending
// now. One answered since (a stream that replays the answer) does not
// pause it.
func (s *Server) chatPause(ctx context.Context, id string, a *answerState, out *sseOut) error {
	ids := a.pendingAbout((*inputReq).aboutCall)
	if len(ids) == 0 {
		return nil
	}
	if now, err := s.pendingNow(ctx, id, ids); err != nil || !now {
		return err
	}
	if err := out.data("", []byte(`{"type":"finish"}`)); err != nil {
		return err
	}
	if err := out.data("", []byte("[DONE]")); err != nil {
		return err
	}
	return errPaused
}

// inputChunks are the chunks of an input request's steps.
func inputChunks(st *step) [][]byte {
	var cs []map[string]any
	switch st.kind {
	case stepInput, stepInputEnd:
		data := *st.input
		data.Type = partInputRequest
		cs = append(cs, map[string]any{"type": "data-input-request", "id": data.RequestID, "data": &data})
		if st.kind == stepInput && data.aboutCall() {
			cs = append(cs, map[string]any{"type": "tool-approval-request", "approvalId": data.RequestID, "toolCallId": data.ToolCallID})
		}
	case stepToolDenied:
		cs = append(cs, map[string]any{"type": "tool-output-denied", "toolCallId": st.id})
	}
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i], _ = json.Marshal(c)
	}
	return out
}

// skipper drops the steps that a paused stream sent, from a stream that goes
// on from where it paused: every step up to the event that opened the last
// of the requests it showed (those whose answers the client sends), but
// the answer's start and its finish. A nil skipper drops nothing.
type skipper struct {
	want, all []string
	skipping  bool
	last      bool // the event being read ends the skipping
}

// newSkipper skips up to the opening of every request of ids.
func newSkipper(ids []string) *skipper {
	return &skipper{want: slices.Clone(ids), all: ids, skipping: len(ids) > 0}
}

// again returns a skipper of the same requests, not yet used.
func (k *skipper) again() *skipper {
	if k == nil {
		return nil
	}
	return newSkipper(k.all)
}

// pass reports whether step st is sent.
func (k *skipper) pass(st *step) bool {
	if !k.active() || st.kind == stepFinish || st.kind == stepStart && !st.retry {
		return true
	}
	if st.kind == stepInput {
		k.want = slices.DeleteFunc(k.want, func(id string) bool { return id == st.id })
		k.last = k.last || len(k.want) == 0
	}
	return false
}

// next ends the steps of one event.
func (k *skipper) next() {
	if k != nil && k.last {
		k.skipping, k.last = false, false
	}
}

// active reports whether steps are still skipped.
func (k *skipper) active() bool { return k != nil && k.skipping }

// about names a list of request ids in an error.
func about(ids []string) string { return strings.Join(ids, ", ") }
