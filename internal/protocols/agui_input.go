package protocols

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Input requests in AG-UI: interrupts. A run whose answer reaches input
// requests still pending ends with RUN_FINISHED whose outcome is
// {"type":"interrupt","interrupts":[…]}, one interrupt per request (its id
// the request's id), while the answer stays open. The next run on the
// thread answers them in RunAgentInput.resume ({interruptId, status,
// payload}): every request pending in the answer must be answered, and
// the run streams the rest of the same answer, from where the interrupted
// run stopped. A resume sent again answers nothing new (the same answer is
// no error) and streams the same.

// maxResumeEntries bounds RunAgentInput.resume.
const maxResumeEntries = 256

// resumeEntry is one answer of RunAgentInput.resume.
type resumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Statuses of a resume entry.
const (
	resumeResolved  = "resolved"
	resumeCancelled = "cancelled"
)

// answer is the answer an entry gives: its payload, or the denial of a
// cancelled approval.
func (e *resumeEntry) answer() json.RawMessage {
	if e.Status == resumeCancelled {
		b, _ := json.Marshal(approvalAnswer{Approved: false, Reason: "cancelled"})
		return b
	}
	return e.Payload
}

// resumeEntries reads RunAgentInput.resume: none when absent, null or
// empty.
func resumeEntries(raw json.RawMessage) ([]resumeEntry, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var es []resumeEntry
	if err := json.Unmarshal(raw, &es); err != nil {
		return nil, parley.Errorf(parley.EINVALID, "resume must be an array of {interruptId, status, payload?}")
	}
	if len(es) > maxResumeEntries {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "resume has %d entries; at most %d", len(es), maxResumeEntries)
	}
	seen := map[string]bool{}
	for i, e := range es {
		switch {
		case !parley.ValidID(e.InterruptID):
			return nil, parley.Errorf(parley.EINVALIDVALUE, "resume[%d].interruptId %q is not an interrupt's id", i, e.InterruptID)
		case seen[e.InterruptID]:
			return nil, parley.Errorf(parley.EINVALIDVALUE, "resume answers interrupt %s twice", e.InterruptID)
		case e.Status != resumeResolved && e.Status != resumeCancelled:
			return nil, parley.Errorf(parley.EINVALIDVALUE, "resume[%d].status %q is not %s or %s", i, e.Status, resumeResolved, resumeCancelled)
		case e.Status == resumeResolved && (len(e.Payload) == 0 || string(e.Payload) == "null"):
			return nil, parley.Errorf(parley.EINVALIDVALUE, "resume[%d] resolves interrupt %s without a payload: the answer", i, e.InterruptID)
		}
		seen[e.InterruptID] = true
	}
	return es, nil
}

// aguiResume serves a run whose input has resume entries: it answers the
// interrupts, as act, and streams the rest of their answer as run
// in.RunID. Nothing is answered unless every entry names a request of the
// thread and every request pending in their message is answered.
func (s *Server) aguiResume(ctx context.Context, w http.ResponseWriter, r *http.Request, act conv.Actor, in *runAgentInput, entries []resumeEntry, last *aguiPosition) {
	thread := in.ThreadID
	err := s.eng.Require(r.Context(), thread, func(st conv.State) error { return st.CanWrite(act) })
	var msg string
	if err == nil {
		msg, err = s.checkResume(r.Context(), thread, entries)
	}
	var (
		a    *answerState
		from parley.Position
		view *viewEpoch
	)
	if err == nil {
		a, from, err = s.answerOf(r.Context(), thread, act, msg)
	}
	if err == nil {
		view, err = s.epochOf(r.Context(), thread)
	}
	ids := make([]string, len(entries))
	for i := 0; err == nil && i < len(entries); i++ {
		e := &entries[i]
		ids[i] = e.InterruptID
		answer := e.answer()
		err = s.host.AnswerInput(r.Context(), act, thread, e.InterruptID, answer)
	}
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	from.Epoch = view.epoch
	if last != nil && last.epoch != view.epoch {
		last = nil // another epoch: the history was replaced, so the run is sent whole
	}
	s.streamAGUI(ctx, w, thread, in.RunID, a, from, last, newSkipper(ids))
}

// viewEpoch is a conversation's epoch.
type viewEpoch struct{ epoch string }

// epochOf returns conversation id's epoch.
func (s *Server) epochOf(ctx context.Context, id string) (*viewEpoch, error) {
	v, err := s.eng.Conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	return &viewEpoch{epoch: v.Conversation.Epoch}, nil
}

// checkResume checks a run's resume entries against the thread's input
// requests, and returns the message that asks them.
func (s *Server) checkResume(ctx context.Context, thread string, entries []resumeEntry) (string, error) {
	inputs, err := s.host.Inputs(ctx, thread, true)
	if err != nil {
		return "", err
	}
	msg := ""
	for _, e := range entries {
		i := slices.IndexFunc(inputs, func(in Input) bool { return in.RequestID == e.InterruptID })
		switch {
		case i < 0:
			return "", parley.Errorf(parley.ENOTFOUND, "interrupt %s is not an input request of thread %s", e.InterruptID, thread)
		case msg != "" && inputs[i].MessageID != msg:
			return "", parley.Errorf(parley.EINVALIDVALUE, "resume answers interrupts of two runs (messages %s and %s): answer one run's at a time", msg, inputs[i].MessageID)
		case e.Status == resumeCancelled && inputs[i].Kind != inputApproval:
			return "", parley.Errorf(parley.EINVALIDVALUE, "interrupt %s is a question: it cannot be cancelled, only answered (or the run stopped)", e.InterruptID)
		}
		if err := fits(&inputs[i], e.answer()); err != nil {
			return "", err
		}
		msg = inputs[i].MessageID
	}
	// The interrupts a run ends with are the requests pending up to where
	// it stopped: every request of the message pending and asked before
	// the last one answered (in the order asked) must be answered too.
	var pending, missing []string
	last := -1
	for _, in := range inputs {
		if in.MessageID != msg || in.Status != inputPending {
			continue
		}
		if slices.ContainsFunc(entries, func(e resumeEntry) bool { return e.InterruptID == in.RequestID }) {
			last = len(pending)
		}
		pending = append(pending, in.RequestID)
	}
	for _, id := range pending[:last+1] {
		if !slices.ContainsFunc(entries, func(e resumeEntry) bool { return e.InterruptID == id }) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return "", parley.Errorf(parley.EINVALIDVALUE, "resume must answer every pending interrupt of the run; it leaves out %s", about(missing))
	}
	return msg, nil
}

// skipped returns the steps of steps that skip passes.
func skipped(skip *skipper, steps []step) []step {
	var out []step
	for i := range steps {
		if skip.pass(&steps[i]) {
			out = append(out, steps[i])
		}
	}
	return out
}

// aguiInterrupt ends the run with an interrupt outcome (errPaused) if the
// answer, as far as it was folded, has input requests pending now. One
// answered since (a run resumed after it) does not interrupt it. The event
// has no SSE id: it is not made of the log.
func (s *Server) aguiInterrupt(ctx context.Context, thread, runID string, a *answerState, out *sseOut) error {
	pending := a.pendingInputs()
	if len(pending) == 0 {
		return nil
	}
	inputs, err := s.host.Inputs(ctx, thread, false)
	if err != nil {
		return err
	}
	var interrupts []map[string]any
	for _, r := range pending {
		if slices.ContainsFunc(inputs, func(in Input) bool { return in.RequestID == r.RequestID && in.Status == inputPending }) {
			interrupts = append(interrupts, interruptOf(r))
		}
	}
	if len(interrupts) == 0 {
		return nil
	}
	f, _ := json.Marshal(map[string]any{"type": "RUN_FINISHED", "threadId": thread, "runId": runID,
		"outcome": map[string]any{"type": "interrupt", "interrupts": interrupts}})
	if err := out.data("", f); err != nil {
		return err
	}
	return errPaused
}

// interruptOf is input request r as an AG-UI interrupt.
func interruptOf(r *inputReq) map[string]any {
	reason := "question"
	if r.Kind == inputApproval {
		reason = "tool_approval"
	}
	it := map[string]any{"id": r.RequestID, "reason": reason, "responseSchema": responseSchema(r)}
	if r.Title != "" {
		it["message"] = r.Title
	}
	if r.ToolCallID != "" {
		it["toolCallId"] = r.ToolCallID
	}
	if r.ExpiresAt != "" {
		it["expiresAt"] = r.ExpiresAt
	}
	meta := map[string]any{"kind": r.Kind}
	if r.Detail != "" {
		meta["detail"] = r.Detail
	}
	if r.ToolName != "" {
		meta["toolName"] = r.ToolName
	}
	if len(r.Args) > 0 {
		meta["args"] = r.Args
	}
	if len(r.Options) > 0 {
		meta["options"] = r.Options
		meta["multiple"] = r.Multiple
	}
	it["metadata"] = meta
	return it
}

// responseSchema is the JSON Schema of an answer to r: its own, else the
// one its kind implies (conv.ImpliedSchema: an approval's {approved,
// reason?}; a question's {choices} of its options, or {text}).
func responseSchema(r *inputReq) json.RawMessage {
	if len(r.Schema) > 0 && bytes.HasPrefix(bytes.TrimSpace(r.Schema), []byte("{")) {
		return r.Schema
	}
	var p parley.Part
	b, _ := json.Marshal(r)
	_ = json.Unmarshal(b, &p)
	return conv.ImpliedSchema(p)
}

// deniedReason is why approval r was not approved: its answer's reason,
// else how it ended (expired, canceled).
func deniedReason(r *inputReq) string {
	var a approvalAnswer
	if r.Status == inputAnswered && json.Unmarshal(r.Answer, &a) == nil {
		return a.Reason
	}
	return r.Status
}
