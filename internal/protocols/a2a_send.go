package protocols

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/a2a"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// SendMessage, GetTask and CancelTask (and 0.3's message/send, tasks/get,
// tasks/cancel). A message is a prompt to the agent, its text the message's
// text parts joined, its id the message's messageId when that is a valid
// Parley id: a send retried with the same messageId is the same prompt (it
// is not queued twice) and gets the same task. A message that names a task
// waiting for input answers the task's pending input requests instead.

// a2aCancelWait bounds how long CancelTask waits for the answer stopped to
// end before it answers the task as it stands.
const a2aCancelWait = 10 * time.Second

// a2aSendParams reads a send's params, in c's version.
func (c *a2aCall) sendParams() (*a2a.SendMessageRequest, *a2a.Error) {
	var req *a2a.SendMessageRequest
	if c.legacy {
		if len(c.params) == 0 || c.params[0] != '{' {
			return nil, a2a.Errorf(a2a.CodeInvalidParams, "params must be an object")
		}
		var err error
		if req, err = a2a.SendParamsFromLegacy(c.params); err != nil {
			return nil, a2a.Errorf(a2a.CodeInvalidParams, "invalid params: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	} else {
		req = &a2a.SendMessageRequest{}
		if e := c.decode(req); e != nil {
			return nil, e
		}
	}
	m := req.Message
	switch {
	case m == nil:
		return nil, a2a.Errorf(a2a.CodeInvalidParams, "params.message is required")
	case m.Role != a2a.RoleUser:
		return nil, a2a.Errorf(a2a.CodeInvalidParams, "params.message.role is %q: a message to an agent is the user's (ROLE_USER)", m.Role)
	case len(m.Parts) == 0:
		return nil, a2a.Errorf(a2a.CodeInvalidParams, "params.message.parts is empty: a message holds at least one part")
	case m.ContextID != "" && !parley.ValidID(m.ContextID):
		return nil, a2a.Errorf(a2a.CodeInvalidParams, "params.message.contextId %q is not a Parley conversation id (1-128 characters of A-Z a-z 0-9 . _ : -)", m.ContextID)
	}
	if c := req.Configuration; c != nil && len(c.TaskPushNotificationConfig) > 0 && string(c.TaskPushNotificationConfig) != "null" {
		return nil, a2a.Errorf(a2a.CodePushNotSupported, "push notifications are not supported: follow a task with SendStreamingMessage or SubscribeToTask")
	}
	return req, nil
}

// metaAgent is params.metadata.agentId: who an admin sends as.
func metaAgent(meta map[string]any) string {
	s, _ := meta["agentId"].(string)
	return s
}

// messageText is the prompt of message m: its text parts joined.
func messageText(m *a2a.Message) (string, *a2a.Error) {
	var b strings.Builder
	for i, p := range m.Parts {
		if p.Text == nil {
			return "", a2a.Errorf(a2a.CodeInvalidParams, "params.message.parts[%d] is not a text part: a prompt takes text parts only (a data part answers an input request, with the task's taskId)", i)
		}
		b.WriteString(*p.Text)
	}
	if b.Len() == 0 {
		return "", a2a.Errorf(a2a.CodeInvalidParams, "params.message has no text")
	}
	return b.String(), nil
}

// a2aAsk serves what a send asks: a prompt queued (in a conversation made
// on first use), or the input requests of the task it names answered. It
// returns the task and the prompt's text.
func (s *Server) a2aAsk(ctx context.Context, c *a2aCall, req *a2a.SendMessageRequest) (*a2aTaskRef, string, error) {
	if !c.who.CanWrite() {
		return nil, "", parley.Errorf(parley.EFORBIDDEN, "a %s token cannot send messages", c.who.Kind)
	}
	act, err := s.host.Actor(c.who, metaAgent(req.Metadata))
	if err != nil {
		return nil, "", err
	}
	m := req.Message
	if m.TaskID != "" {
		ref, err := s.a2aAnswerInputs(ctx, c, act, m)
		return ref, "", err
	}
	text, e := messageText(m)
	if e != nil {
		return nil, "", e
	}
	if err := s.checkPromptSize(text); err != nil {
		return nil, "", err
	}
	convID := m.ContextID
	if convID == "" {
		convID = engine.NewID()
	}
	if err := s.ensureConversation(ctx, c.who, act, convID, c.agent); err != nil {
		return nil, "", err
	}
	promptID := m.MessageID
	if !parley.ValidID(promptID) {
		promptID = engine.NewID()
	}
	a, from, err := s.ask(ctx, convID, act, promptID, text, c.agent, true)
	if err != nil {
		return nil, "", err
	}
	view, err := s.eng.Conversation(ctx, convID)
	if err != nil {
		return nil, "", err
	}
	from.Epoch = view.Conversation.Epoch
	return &a2aTaskRef{id: a2aTaskID(convID, a.prompt), conv: convID, prompt: a.prompt, from: from}, text, nil
}

// a2aAnswerInputs answers, as act, the input requests pending of the task
// message m names: with one pending, a data part is its answer (or a text
// part a question's {"text"}); with several, one data part maps each
// request id to its answer.
func (s *Server) a2aAnswerInputs(ctx context.Context, c *a2aCall, act conv.Actor, m *a2a.Message) (*a2aTaskRef, error) {
	ref, err := s.findTask(ctx, c.who, c.agent, m.TaskID)
	if err != nil {
		return nil, err
	}
	if m.ContextID != "" && m.ContextID != ref.conv {
		return nil, a2a.Errorf(a2a.CodeInvalidParams, "params.message.contextId %s is not task %s's context (%s)", m.ContextID, ref.id, ref.conv)
	}
	_, e, _, err := s.foldTask(ctx, ref, c.agent, "")
	if err != nil {
		return nil, err
	}
	if st := e.task.Status.State; st != a2a.StateInputRequired {
		why := "it is " + string(st) + ": a message with a taskId answers a task waiting for input (TASK_STATE_INPUT_REQUIRED); send a new message without taskId to ask again"
		if st.Terminal() {
			why = "it has ended (" + string(st) + "); send a new message, with its contextId and no taskId, to ask again"
		}
		return nil, &a2a.Error{Code: a2a.CodeUnsupportedOperation, Message: "task " + ref.id + " takes no message: " + why,
			Data: map[string]string{"code": parley.EINVALIDVALUE, "message": why}}
	}
	inputs, err := s.host.Inputs(ctx, ref.conv, true)
	if err != nil {
		return nil, err
	}
	var pending []*Input
	for i := range inputs {
		if in := &inputs[i]; in.Status == inputPending && e.answer != nil && in.MessageID == e.answer.ID {
			pending = append(pending, in)
		}
	}
	if len(pending) == 0 {
		return ref, nil // answered meanwhile: the task goes on
	}
	answers, err := a2aAnswers(pending, m.Parts)
	if err != nil {
		return nil, err
	}
	for _, in := range pending {
		if ans, ok := answers[in.RequestID]; ok {
			if err := s.host.AnswerInput(ctx, act, ref.conv, in.RequestID, ans); err != nil {
				return nil, err
			}
		}
	}
	return ref, nil
}

// a2aSend serves SendMessage: the task once it ended or waits for input
// (or at once, with returnImmediately). The wait is a connection of the
// token.
func (s *Server) a2aSend(w http.ResponseWriter, r *http.Request, c *a2aCall) {
	ctx, done, req, ref, text, ok := s.a2aStart(w, r, c)
	if !ok {
		return
	}
	defer done()
	var hl *int
	immediate := false
	if conf := req.Configuration; conf != nil {
		hl, immediate = conf.HistoryLength, conf.ReturnImmediately
	}
	enc, err := s.a2aWait(ctx, ref, c.agent, text, !immediate)
	if err != nil {
		s.reply(w, c, nil, err)
		return
	}
	s.reply(w, c, &a2a.SendMessageResponse{Task: enc.snapshot(hl)}, nil)
}

// a2aWait folds the task as it stands and, with wait, follows it until it
// ends or waits for input that is pending.
func (s *Server) a2aWait(ctx context.Context, ref *a2aTaskRef, agent, text string, wait bool) (*a2aEnc, error) {
	a, e, seq, err := s.foldTask(ctx, ref, agent, text)
	if err != nil || !wait || a.ended() {
		return e, err
	}
	if paused, err := s.a2aPaused(ctx, ref, a, e); err != nil || paused {
		return e, err
	}
	// Bounded: past a2aBlockingWait the task is answered as it stands,
	// its status saying what it waits on.
	wctx, cancel := context.WithTimeout(ctx, a2aBlockingWait)
	defer cancel()
	out := discardOut()
	err = s.followAnswer(wctx, ref.conv, parley.Position{Seq: seq, Epoch: ref.from.Epoch}, a, out, func(steps []step, _ int64) error {
		e.events(steps, a)
		if paused, err := s.a2aPaused(ctx, ref, a, e); err != nil || paused {
			return errPaused
		}
		return nil
	})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = nil
	}
	return e, err
}

// a2aBlockingWait bounds how long a blocking SendMessage waits for its task
// to end or to wait for input.
const a2aBlockingWait = 60 * time.Second

// a2aPaused reports whether the task waits for input still pending now.
func (s *Server) a2aPaused(ctx context.Context, ref *a2aTaskRef, a *answerState, e *a2aEnc) (bool, error) {
	if e.task.Status.State != a2a.StateInputRequired || a.ended() {
		return false, nil
	}
	return s.pendingNow(ctx, ref.conv, a.pendingAbout(func(*inputReq) bool { return true }))
}

// a2aGetTask serves GetTask: the task as it stands.
func (s *Server) a2aGetTask(w http.ResponseWriter, r *http.Request, c *a2aCall) {
	var req a2a.GetTaskRequest
	if e := c.decode(&req); e != nil {
		writeRPC(w, c.id, nil, e)
		return
	}
	ref, err := s.findTask(r.Context(), c.who, c.agent, req.ID)
	var e *a2aEnc
	if err == nil {
		_, e, _, err = s.foldTask(r.Context(), ref, c.agent, "")
	}
	if err != nil {
		s.reply(w, c, nil, err)
		return
	}
	s.reply(w, c, e.snapshot(req.HistoryLength), nil)
}

// a2aCancel serves CancelTask: a prompt still queued is withdrawn, one
// being answered is stopped (its runner told to stop, as POST …/abort with
// its promptId does); the task is answered once its answer ended, or as it
// stands after a2aCancelWait.
func (s *Server) a2aCancel(w http.ResponseWriter, r *http.Request, c *a2aCall) {
	var req a2a.CancelTaskRequest
	if e := c.decode(&req); e != nil {
		writeRPC(w, c.id, nil, e)
		return
	}
	ctx := r.Context()
	ref, err := s.findTask(ctx, c.who, c.agent, req.ID)
	if err != nil {
		s.reply(w, c, nil, err)
		return
	}
	if !c.who.CanWrite() {
		s.reply(w, c, nil, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot cancel a task", c.who.Kind))
		return
	}
	act, err := s.host.Actor(c.who, metaAgent(req.Metadata))
	var e *a2aEnc
	if err == nil {
		_, e, _, err = s.foldTask(ctx, ref, c.agent, "")
	}
	if err != nil {
		s.reply(w, c, nil, err)
		return
	}
	notCancelable := func(why string) {
		writeRPC(w, c.id, nil, &a2a.Error{Code: a2a.CodeTaskNotCancelable, Message: fmt.Sprintf("task %s cannot be canceled: %s", ref.id, why),
			Data: map[string]string{"code": parley.EINVALIDVALUE, "message": why}})
	}
	if st := e.task.Status.State; st.Terminal() {
		notCancelable("it has ended (" + string(st) + ")")
		return
	}
	st, err := s.eng.PromptStatus(ctx, ref.conv, ref.prompt)
	if err == nil {
		switch st.State {
		case parley.PromptStateQueued:
			_, err = s.eng.WithdrawPrompt(ctx, ref.conv, conv.WithdrawPrompt{Actor: act, ID: ref.prompt})
		case parley.PromptStateDispatched, parley.PromptStateAnswering:
			_, err = s.runners.StopAnswer(ctx, ref.conv, act, ref.prompt)
		default:
			notCancelable("its prompt has ended")
			return
		}
	}
	if err == nil {
		_, err = s.eng.WaitPrompt(ctx, ref.conv, ref.prompt, a2aCancelWait)
	}
	if err == nil {
		e, err = s.a2aWait(ctx, ref, c.agent, "", false)
	}
	s.reply(w, c, e.snapshotOrNil(), err)
}

// snapshotOrNil is the task's snapshot, nil for a nil encoder.
func (e *a2aEnc) snapshotOrNil() *a2a.Task {
	if e == nil {
		return nil
	}
	return e.snapshot(nil)
}

// discardRW is a ResponseWriter that keeps nothing: the output of an answer
// followed for a blocking call, whose result is written after.
type discardRW struct{ h http.Header }

func (d *discardRW) Header() http.Header         { return d.h }
func (d *discardRW) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardRW) WriteHeader(int)             {}
func (d *discardRW) Flush()                      {}

// discardOut is an event writer that writes nowhere.
func discardOut() *sseOut {
	d := &discardRW{h: http.Header{}}
	return &sseOut{w: d, rc: http.NewResponseController(d), bw: bufio.NewWriter(io.Discard), limit: time.Second}
}

// a2aAnswers reads the answers a message's parts give the pending input
// requests: with one pending, a data part is its answer (or a text part a
// question's {"text"}); with several, one data part maps each request id
// to its answer. Each answer is checked against its request.
func a2aAnswers(pending []*Input, parts []a2a.Part) (map[string]json.RawMessage, error) {
	answers := map[string]json.RawMessage{}
	bad := func(format string, args ...any) error {
		return a2a.Errorf(a2a.CodeInvalidParams, format, args...)
	}
	if len(parts) != 1 {
		return nil, bad("params.message answers the task's input request: it holds one part (%d given)", len(parts))
	}
	p := parts[0]
	switch {
	case len(pending) == 1 && p.Data != nil:
		answers[pending[0].RequestID] = p.Data
	case len(pending) == 1 && p.Text != nil && pending[0].Kind == inputQuestion:
		b, _ := json.Marshal(map[string]string{"text": *p.Text})
		answers[pending[0].RequestID] = b
	case len(pending) == 1:
		return nil, bad("input request %s is a %s: answer it with a data part (an approval's is {\"approved\": true|false, \"reason\"?: string})", pending[0].RequestID, pending[0].Kind)
	case p.Data == nil:
		return nil, bad("the task waits for %d input requests: answer them with one data part {\"<requestId>\": <answer>, …}", len(pending))
	default:
		if err := json.Unmarshal(p.Data, &answers); err != nil {
			return nil, bad("the task waits for %d input requests: the data part must be an object {\"<requestId>\": <answer>, …}", len(pending))
		}
	}
	for id, ans := range answers {
		found := false
		for _, in := range pending {
			if in.RequestID == id {
				found = true
				if err := fits(in, ans); err != nil {
					return nil, err
				}
			}
		}
		if !found {
			return nil, bad("%q is not an input request the task waits for", id)
		}
	}
	return answers, nil
}

// a2aStart begins a send of either kind: its params read, the caller's
// right to write checked, the call counted as a connection of its token
// (done ends it) and what it asks done. When ok is false it has answered.
func (s *Server) a2aStart(w http.ResponseWriter, r *http.Request, c *a2aCall) (ctx context.Context, done func(), req *a2a.SendMessageRequest, ref *a2aTaskRef, text string, ok bool) {
	req, e := c.sendParams()
	if e != nil {
		writeRPC(w, c.id, nil, e)
		return nil, nil, nil, nil, "", false
	}
	if !c.who.CanWrite() {
		s.reply(w, c, nil, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot send messages", c.who.Kind))
		return nil, nil, nil, nil, "", false
	}
	ctx, done, ok = s.host.ConnectStream(w, r, c.who)
	if !ok {
		return nil, nil, nil, nil, "", false
	}
	ref, text, err := s.a2aAsk(ctx, c, req)
	if err != nil {
		done()
		s.reply(w, c, nil, err)
		return nil, nil, nil, nil, "", false
	}
	return ctx, done, req, ref, text, true
}
