package protocols

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/transport"
)

// AG-UI (the Agent User Interaction protocol of CopilotKit and others):
// POST /v1/ag-ui takes a RunAgentInput and streams the run's events as SSE
// "data:" lines. The thread is a conversation (made on first use), the run
// is the prompt of the last user message (the runId is its id), and the
// events are the answer as the log holds it (answer.go). Every event
// carries an SSE id, "<epoch>:<seq>" for the last event made of the log's
// event seq (and "<epoch>:<seq>:<k>" for the k-th before it), so that a
// client that posts the same run again with Last-Event-ID gets exactly the
// events after that one.

// runAgentInput is AG-UI's RunAgentInput. Of it Parley reads the thread,
// the run, the last message and forwardedProps' to and agentId; tools,
// context and state are the client's (a Parley runner has its own).
type runAgentInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     string          `json:"parentRunId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	State           json.RawMessage `json:"state,omitempty"`
	Messages        lastAGUIMessage `json:"messages"`
	Tools           json.RawMessage `json:"tools,omitempty"`
	Context         json.RawMessage `json:"context,omitempty"`
	ForwardedProps  json.RawMessage `json:"forwardedProps,omitempty"`
	Resume          json.RawMessage `json:"resume,omitempty"`
}

// aguiMessage is an AG-UI message as far as a prompt needs it.
type aguiMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// lastAGUIMessage is the last of a run's AG-UI messages (see lastOf).
type lastAGUIMessage struct{ lastOf[aguiMessage] }

// about names AG-UI messages in the errors of lastOf.
func (aguiMessage) about() (plural, one string) {
	return "AG-UI messages", "an AG-UI message {id, role, content}"
}

// promptText is the text of the last message, which must be the user's:
// its content string, or its text parts.
func (l *lastAGUIMessage) promptText() (string, error) {
	m := l.last
	switch {
	case m == nil:
		return "", parley.Errorf(parley.EINVALIDVALUE, "messages is empty: the last message is the user's question")
	case m.Role != string(parley.RoleUser):
		return "", parley.Errorf(parley.EINVALIDVALUE, "the last message is the %q's; it must be the user's question", m.Role)
	}
	var text string
	if json.Unmarshal(m.Content, &text) != nil {
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", parley.Errorf(parley.EINVALID, "the last message's content must be a string or an array of parts")
		}
		for i, p := range parts {
			if p.Type != "text" {
				return "", parley.Errorf(parley.EINVALIDVALUE, "the last message's part %d is %q: a prompt takes text only", i, p.Type)
			}
			text += p.Text
		}
	}
	if text == "" {
		return "", parley.Errorf(parley.EINVALIDVALUE, "the last message has no text")
	}
	return text, nil
}

// forwardedProps are what Parley reads of RunAgentInput.forwardedProps:
// the agent asked and, for an admin token, who asks. Other keys are the
// client's.
type forwardedProps struct {
	To      string `json:"to"`
	AgentID string `json:"agentId"`
}

// aguiPosition is a resume position of an AG-UI stream: the events made of
// the log up to seq were received, and of those made of seq itself the
// first frames+1 (all when frames < 0).
type aguiPosition struct {
	epoch  string
	seq    int64
	frames int
}

// aguiLastEventID reads Last-Event-ID as the AG-UI stream writes it:
// "<epoch>:<seq>" or "<epoch>:<seq>:<k>". nil when absent or empty.
func aguiLastEventID(r *http.Request) (*aguiPosition, error) {
	ids := r.Header.Values("Last-Event-ID")
	if len(ids) > 1 {
		return nil, parley.Errorf(parley.EINVALID, "give Last-Event-ID at most once")
	}
	if len(ids) == 0 || ids[0] == "" {
		return nil, nil
	}
	bad := parley.Errorf(parley.EINVALID, "Last-Event-ID must be \"<epoch>:<seq>\" or \"<epoch>:<seq>:<k>\" as the server sent it, not %q", ids[0])
	f := strings.Split(ids[0], ":")
	if len(f) < 2 || len(f) > 3 || !parley.ValidEpoch(f[0]) {
		return nil, bad
	}
	seq, ok := transport.ParseSeq(f[1])
	if !ok {
		return nil, bad
	}
	p := &aguiPosition{epoch: f[0], seq: seq, frames: -1}
	if len(f) == 3 {
		k, ok := transport.ParseSeq(f[2])
		if !ok || k > 1<<20 {
			return nil, bad
		}
		p.frames = int(k)
	}
	return p, nil
}

// checkRun checks a run's ids.
func checkRun(in *runAgentInput, to string) error {
	const valid = "1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)"
	switch {
	case !parley.ValidID(in.ThreadID):
		return parley.Errorf(parley.EINVALIDVALUE, "threadId (the conversation's id) %q is not %s", in.ThreadID, valid)
	case !parley.ValidID(in.RunID):
		return parley.Errorf(parley.EINVALIDVALUE, "runId (the id of the prompt it asks) %q is not %s", in.RunID, valid)
	case to != "" && !parley.ValidID(to):
		return parley.Errorf(parley.EINVALIDVALUE, "forwardedProps.to %q is not a valid agent id", to)
	}
	return nil
}

// AGUI serves POST /v1/ag-ui: it runs the agent for the last user message of a RunAgentInput:
// the prompt is queued as the caller (once per runId), and its answer
// streamed as AG-UI events.
func (s *Server) AGUI(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		s.host.Refuse(w, r, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot run an agent", who.Kind))
		return
	}
	resume, err := aguiLastEventID(r)
	if err != nil {
		s.host.Refuse(w, r, err)
		return
	}
	// The run is a stream, a connection of the token: its bound is checked
	// before the body (up to 16 MiB) is read.
	ctx, done, ok := s.host.ConnectStream(w, r, who)
	if !ok {
		return
	}
	defer done()
	var in runAgentInput
	if err := s.readBody(w, r, &in); err != nil {
		s.host.WriteError(w, err)
		return
	}
	var fp forwardedProps
	if len(in.ForwardedProps) > 0 && string(in.ForwardedProps) != "null" {
		if err := json.Unmarshal(in.ForwardedProps, &fp); err != nil {
			s.host.WriteError(w, parley.Errorf(parley.EINVALID, "forwardedProps must be an object whose to and agentId are strings"))
			return
		}
	}
	act, err := s.host.Actor(who, fp.AgentID)
	var text string
	if err == nil {
		err = checkRun(&in, fp.To)
	}
	var answers []resumeEntry
	if err == nil {
		answers, err = resumeEntries(in.Resume)
	}
	if err == nil && len(answers) > 0 {
		// A run that answers the interrupts of one before it: the answer
		// goes on.
		s.aguiResume(ctx, w, r, act, &in, answers, resume)
		return
	}
	if err == nil {
		text, err = in.Messages.promptText()
	}
	if err == nil {
		err = s.checkPromptSize(text)
	}
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	if resume != nil {
		// A run resumed is in a thread that exists: none is made for it.
		err = s.eng.Require(r.Context(), in.ThreadID, func(st conv.State) error { return st.CanWrite(act) })
	} else {
		err = s.ensureConversation(r.Context(), who, act, in.ThreadID, fp.To)
	}
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	view, err := s.eng.Conversation(r.Context(), in.ThreadID)
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	epoch := view.Conversation.Epoch
	var (
		a    *answerState
		from parley.Position
	)
	if resume != nil && resume.epoch == epoch {
		var found bool
		from, found, err = s.rd.AskedBefore(r.Context(), in.ThreadID, in.RunID, act.AgentID)
		if err == nil && !found {
			err = parley.Errorf(parley.ENOTFOUND, "run %s is not in thread %s: it cannot be resumed", in.RunID, in.ThreadID)
		}
		a = newAnswer(in.RunID)
	} else {
		resume = nil // another epoch: the history was replaced, so the run is sent whole
		a, from, err = s.ask(r.Context(), in.ThreadID, act, in.RunID, text, fp.To, true)
	}
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	from.Epoch = epoch
	s.streamAGUI(ctx, w, in.ThreadID, in.RunID, a, from, resume, nil)
}

// streamAGUI answers with the AG-UI events of run runID's answer a,
// followed from position from; with resume, only the events after it. With
// skip, the run goes on from where one before it was interrupted
// (agui_input.go). A run is interrupted where the answer waits on input
// requests still pending.
func (s *Server) streamAGUI(ctx context.Context, w http.ResponseWriter, thread, runID string, a *answerState, from parley.Position, resume *aguiPosition, skip *skipper) {
	out := s.startSSE(w)
	defer out.done()
	enc := &aguiEncoder{thread: thread, run: runID}
	// write writes the frames made of log event seq, past the resume position.
	write := func(frames [][]byte, seq int64) error {
		for k, f := range frames {
			if resume != nil && (seq < resume.seq || seq == resume.seq && (resume.frames < 0 || k <= resume.frames)) {
				continue
			}
			id := from.Epoch + ":" + strconv.FormatInt(seq, 10)
			if k < len(frames)-1 {
				id += ":" + strconv.Itoa(k)
			}
			if err := out.data(id, f); err != nil {
				return err
			}
		}
		return nil
	}
	// The run starts with RUN_STARTED, the first event with an id: a client
	// that resumes has it.
	if resume == nil {
		started, _ := json.Marshal(map[string]string{"type": "RUN_STARTED", "threadId": thread, "runId": runID})
		if write([][]byte{started}, from.Seq) != nil {
			return
		}
	}
	follow := func(seq int64) error {
		return s.followAnswer(ctx, thread, parley.Position{Seq: seq, Epoch: from.Epoch}, a, out, func(steps []step, seq int64) error {
			if resume != nil && a.tombstone != 0 && a.tombstone <= resume.seq {
				// Retention compacted deltas of the run before the position:
				// the frames made of them then are not those made of them
				// now, so the client's place among them is lost. Nothing was
				// sent yet (every frame so far was at or before the position).
				return errRestartRun
			}
			if len(steps) > 0 && steps[0].kind == stepStatus {
				// Not from the log: no id, so that no resume counts it.
				for _, f := range enc.frames(steps) {
					if err := out.data("", f); err != nil {
						return err
					}
				}
				return nil
			}
			if skip.active() {
				steps = skipped(skip, steps)
			}
			skip.next()
			if err := write(enc.frames(steps), seq); err != nil || a.ended() || skip.active() {
				return err
			}
			return s.aguiInterrupt(ctx, thread, runID, a, out)
		})
	}
	end := follow(from.Seq)
	if errors.Is(end, errRestartRun) {
		// As for a history replaced: the run is sent whole.
		resume, a, enc, skip = nil, a.again(), &aguiEncoder{thread: thread, run: runID}, skip.again()
		started, _ := json.Marshal(map[string]string{"type": "RUN_STARTED", "threadId": thread, "runId": runID})
		if write([][]byte{started}, from.Seq) != nil {
			return
		}
		end = follow(from.Seq)
	}
	if text, ok := s.endText(thread, end); ok {
		f, _ := json.Marshal(map[string]string{"type": "RUN_ERROR", "message": text, "code": parley.ErrorCode(end)})
		if out.data("", f) == nil {
			_ = out.flush()
		}
	}
}

// aguiEncoder makes the AG-UI events of an answer's steps. The answer is one
// assistant message (its Parley id): each text part is a TEXT_MESSAGE_START,
// CONTENT and END of it, and each tool call a TOOL_CALL_START, ARGS, END
// under it, then a TOOL_CALL_RESULT once it has an outcome.
type aguiEncoder struct {
	thread, run string
	answer      string
}

func (e *aguiEncoder) frames(steps []step) [][]byte {
	var out [][]byte
	add := func(v map[string]any) {
		b, _ := json.Marshal(v)
		out = append(out, b)
	}
	for i := range steps {
		st := &steps[i]
		switch st.kind {
		case stepStatus:
			add(map[string]any{"type": "CUSTOM", "name": "parley.status", "value": json.RawMessage(st.text)})
		case stepStart:
			e.answer = st.id
		case stepTextStart:
			add(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": e.answer, "role": "assistant"})
		case stepTextDelta:
			add(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": e.answer, "delta": st.text})
		case stepTextEnd:
			add(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": e.answer})
		case stepToolStart:
			add(map[string]any{"type": "TOOL_CALL_START", "toolCallId": st.id, "toolCallName": st.part.ToolName, "parentMessageId": e.answer})
		case stepToolInput:
			if len(st.part.Args) > 0 {
				add(map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": st.id, "delta": string(st.part.Args)})
			}
			add(map[string]any{"type": "TOOL_CALL_END", "toolCallId": st.id})
		case stepToolOutput, stepToolError:
			content := string(st.part.Result)
			if st.kind == stepToolError {
				content = st.part.Error
				if content == "" {
					content = "the tool call failed"
				}
			}
			add(map[string]any{"type": "TOOL_CALL_RESULT", "messageId": e.answer + ":" + st.id, "toolCallId": st.id, "content": content, "role": "tool"})
		case stepToolDenied:
			// Not run: its result is the approval's answer.
			content, _ := json.Marshal(approvalAnswer{Approved: false, Reason: deniedReason(st.input)})
			add(map[string]any{"type": "TOOL_CALL_RESULT", "messageId": e.answer + ":" + st.id, "toolCallId": st.id, "content": string(content), "role": "tool"})
		case stepFinish:
			switch st.end {
			case endError:
				add(map[string]any{"type": "RUN_ERROR", "message": st.text})
			case endCanceled:
				add(map[string]any{"type": "RUN_FINISHED", "threadId": e.thread, "runId": e.run, "outcome": map[string]string{"type": "cancelled"}})
			default:
				add(map[string]any{"type": "RUN_FINISHED", "threadId": e.thread, "runId": e.run})
			}
		}
	}
	return out
}
