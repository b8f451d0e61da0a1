package protocols

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/a2a"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// An A2A task is a prompt and its answer. Its events are made of the
// answer's steps (answer.go), and of nothing else, so that the events made
// again from the same log are the same events:
//
//   - the answer's start: a status update, working;
//   - each text part: an artifact (its id the part's, "t<i>"), its first
//     delta with append false, the next ones with append true, its end an
//     empty text with append and lastChunk;
//   - each tool call: an artifact "tool-<callId>" of one data part {type:
//     "tool-call", toolCallId, name, input, output, error, state}, sent
//     again whole (append false) as the call goes on; state is
//     input-streaming, input-available, output-available, output-error or
//     output-denied;
//   - an input request opened: a status update, input-required, whose
//     message holds every request pending as a data part (the request as
//     the log holds it: requestId, kind, title, detail, schema, options,
//     toolCallId…); its end: working again once none is pending;
//   - the answer's end: completed, canceled or failed (with the error's
//     text as the status message).

// taskSep separates a task id's conversation and prompt: no id holds it.
const taskSep = "~"

// a2aTaskID is the id of the task of prompt promptID of conversation convID.
func a2aTaskID(convID, promptID string) string { return convID + taskSep + promptID }

// a2aTaskRef is a task found: its conversation, its prompt, where its answer
// is followed from, and the conversation's epoch.
type a2aTaskRef struct {
	id, conv, prompt string
	from             parley.Position
}

// a2aEnc folds an answer's steps into its task and makes its events.
type a2aEnc struct {
	task   a2a.Task
	prompt string // the prompt's text, for the history
	arts   map[string]int
	answer *parley.Message
}

func newA2AEnc(ref *a2aTaskRef, text string) *a2aEnc {
	return &a2aEnc{task: a2a.Task{ID: ref.id, ContextID: ref.conv, Status: a2a.TaskStatus{State: a2a.StateSubmitted}}, prompt: text, arts: map[string]int{}}
}

// status sets the task's status and returns its update.
func (e *a2aEnc) status(state a2a.TaskState, m *a2a.Message) a2a.StreamResponse {
	e.task.Status = a2a.TaskStatus{State: state, Message: m}
	return a2a.StreamResponse{StatusUpdate: &a2a.TaskStatusUpdateEvent{TaskID: e.task.ID, ContextID: e.task.ContextID, Status: e.task.Status}}
}

// artifact records an artifact update and returns it.
func (e *a2aEnc) artifact(id, name string, p a2a.Part, appendTo, last bool) a2a.StreamResponse {
	art := a2a.Artifact{ArtifactID: id, Name: name, Parts: []a2a.Part{p}}
	i, ok := e.arts[id]
	switch {
	case !ok:
		e.arts[id] = len(e.task.Artifacts)
		e.task.Artifacts = append(e.task.Artifacts, art)
	case appendTo && p.Text != nil:
		t := e.task.Artifacts[i].Parts[0].Text
		joined := *t + *p.Text
		e.task.Artifacts[i].Parts[0].Text = &joined
	default:
		e.task.Artifacts[i] = art
	}
	return a2a.StreamResponse{ArtifactUpdate: &a2a.TaskArtifactUpdateEvent{TaskID: e.task.ID, ContextID: e.task.ContextID, Artifact: art, Append: appendTo, LastChunk: last}}
}

// toolData is a tool call's artifact part.
func toolData(p *parley.Part, state, errText string, withInput bool) a2a.Part {
	d := map[string]any{"type": "tool-call", "toolCallId": p.CallID, "name": p.ToolName, "state": state}
	if withInput {
		if p.Args != nil {
			d["input"] = p.Args
		} else {
			d["input"] = json.RawMessage(`{}`)
		}
	}
	if state == "output-available" && p.Result != nil {
		d["output"] = p.Result
	}
	if errText != "" {
		d["error"] = errText
	}
	b, _ := json.Marshal(d)
	return a2a.DataPart(b)
}

// events folds steps (those of one log event) into the task and returns
// its events. a is the answer they are of, for its pending requests.
func (e *a2aEnc) events(steps []step, a *answerState) []a2a.StreamResponse {
	var out []a2a.StreamResponse
	calls := map[string]*parley.Part{}
	for i := range steps {
		st := &steps[i]
		switch st.kind {
		case stepStart:
			if st.id != "" {
				out = append(out, e.status(a2a.StateWorking, nil))
			}
		case stepTextStart, stepTextDelta:
			_, started := e.arts[st.id]
			if st.kind == stepTextStart && started {
				continue
			}
			if st.kind == stepTextStart {
				// Sent with its first delta, or its end.
				e.arts[st.id] = -1
				continue
			}
			if e.arts[st.id] == -1 {
				delete(e.arts, st.id)
				out = append(out, e.artifact(st.id, "text", a2a.TextPart(st.text), false, false))
			} else {
				out = append(out, e.artifact(st.id, "text", a2a.TextPart(st.text), true, false))
			}
		case stepTextEnd:
			if e.arts[st.id] == -1 {
				delete(e.arts, st.id)
				out = append(out, e.artifact(st.id, "text", a2a.TextPart(""), false, true))
			} else {
				out = append(out, e.artifact(st.id, "text", a2a.TextPart(""), true, true))
			}
		case stepToolStart:
			calls[st.id] = st.part
			out = append(out, e.artifact("tool-"+st.id, st.part.ToolName, toolData(st.part, "input-streaming", "", false), false, false))
		case stepToolInput:
			calls[st.id] = st.part
			out = append(out, e.artifact("tool-"+st.id, st.part.ToolName, toolData(st.part, "input-available", "", true), false, false))
		case stepToolOutput, stepToolError:
			p := *st.part
			if p.ToolName == "" {
				p.ToolName = e.toolName(st.id)
			}
			state, text := "output-available", ""
			if st.kind == stepToolError {
				state, text = "output-error", p.Error
				if text == "" {
					text = "the tool call failed"
				}
			}
			out = append(out, e.artifact("tool-"+st.id, p.ToolName, toolData(&p, state, text, true), false, true))
		case stepToolDenied:
			p := parley.Part{CallID: st.id, ToolName: e.toolName(st.id)}
			out = append(out, e.artifact("tool-"+st.id, p.ToolName, toolData(&p, "output-denied", deniedReason(st.input), false), false, true))
		case stepStatus:
			out = append(out, e.status(a2a.StateSubmitted, e.waitMessage(st.text)))
		case stepInput:
			out = append(out, e.status(a2a.StateInputRequired, e.inputMessage(a)))
		case stepInputEnd:
			if len(a.pendingInputs()) == 0 {
				out = append(out, e.status(a2a.StateWorking, nil))
			} else {
				out = append(out, e.status(a2a.StateInputRequired, e.inputMessage(a)))
			}
		case stepFinish:
			switch st.end {
			case endComplete:
				out = append(out, e.status(a2a.StateCompleted, nil))
			case endCanceled:
				out = append(out, e.status(a2a.StateCanceled, nil))
			default:
				out = append(out, e.status(a2a.StateFailed, &a2a.Message{MessageID: e.task.ID + "-error", ContextID: e.task.ContextID,
					TaskID: e.task.ID, Role: a2a.RoleAgent, Parts: []a2a.Part{a2a.TextPart(st.text)}}))
			}
		}
	}
	if a.m != nil {
		e.answer = a.m
	}
	return out
}

// toolName is the name of tool call id as its artifact holds it.
func (e *a2aEnc) toolName(id string) string {
	if i, ok := e.arts["tool-"+id]; ok && i >= 0 {
		return e.task.Artifacts[i].Name
	}
	return ""
}

// inputMessage is the message of an input-required status: the requests
// pending, a data part each.
func (e *a2aEnc) inputMessage(a *answerState) *a2a.Message {
	m := &a2a.Message{MessageID: e.task.ID + "-input", ContextID: e.task.ContextID, TaskID: e.task.ID, Role: a2a.RoleAgent}
	var ids []string
	for _, r := range a.pendingInputs() {
		c := *r
		c.Type = partInputRequest
		b, _ := json.Marshal(&c)
		m.Parts = append(m.Parts, a2a.DataPart(b))
		ids = append(ids, r.RequestID)
	}
	m.MessageID += "-" + strings.Join(ids, "-")
	return m
}

// snapshot is the task as it stands, its history the prompt (the user's
// message) and the answer's text (the agent's), the last historyLength of
// them when it is set.
func (e *a2aEnc) snapshot(historyLength *int) *a2a.Task {
	t := e.task
	t.Artifacts = append([]a2a.Artifact(nil), e.task.Artifacts...)
	var hist []a2a.Message
	if e.prompt != "" {
		hist = append(hist, a2a.Message{MessageID: t.ID[strings.LastIndex(t.ID, taskSep)+1:], ContextID: t.ContextID, TaskID: t.ID, Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(e.prompt)}})
	}
	if e.answer != nil {
		var parts []a2a.Part
		for _, p := range e.answer.Parts {
			if p.Type == parley.PartText && p.Text != "" {
				parts = append(parts, a2a.TextPart(p.Text))
			}
		}
		if len(parts) > 0 {
			hist = append(hist, a2a.Message{MessageID: e.answer.ID, ContextID: t.ContextID, TaskID: t.ID, Role: a2a.RoleAgent, Parts: parts})
		}
	}
	if historyLength != nil && *historyLength >= 0 && len(hist) > *historyLength {
		hist = hist[len(hist)-*historyLength:]
	}
	t.History = hist
	return &t
}

// findTask finds task id of agent for who: a prompt of a conversation who
// may read, asked of agent (as far as is known: its answer is agent's, or
// it waits for agent). Anything else is TaskNotFound, never told apart.
func (s *Server) findTask(ctx context.Context, who parley.Identity, agent, id string) (*a2aTaskRef, error) {
	convID, promptID, ok := strings.Cut(id, taskSep)
	if !ok || !parley.ValidID(convID) || !parley.ValidID(promptID) {
		return nil, taskNotFound(id)
	}
	ref := &a2aTaskRef{id: id, conv: convID, prompt: promptID}
	var queued bool
	var to string
	err := s.eng.Require(ctx, convID, func(st conv.State) error {
		if err := st.CanRead(who); err != nil {
			return err
		}
		_, ref.from, queued = st.Asked(promptID)
		for _, p := range st.Queue {
			if p.ID == promptID {
				to = p.To
				if p.Runner != "" {
					to = p.Runner
				}
			}
		}
		ref.from.Epoch = st.Conversation.Epoch
		return nil
	})
	if err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND || parley.ErrorCode(err) == parley.EFORBIDDEN {
			return nil, taskNotFound(id)
		}
		return nil, err
	}
	if queued {
		if to != "" && to != agent {
			return nil, taskNotFound(id)
		}
		return ref, nil
	}
	m, err := s.rd.StoredMessage(ctx, convID, promptID)
	switch {
	case parley.ErrorCode(err) == parley.ENOTFOUND:
		// Ended before it was dispatched (withdrawn): the prompt's end is
		// its whole task, while the conversation remembers it.
		st, serr := s.eng.PromptStatus(ctx, convID, promptID)
		if serr != nil || st.EndedSeq == 0 {
			return nil, taskNotFound(id)
		}
		ref.from.Seq = st.EndedSeq - 1
		return ref, nil
	case err != nil:
		return nil, err
	case m.Role != parley.RoleUser:
		return nil, taskNotFound(id) // not a prompt: an agent's message
	}
	ref.from.Seq = m.Seq - 1
	return ref, nil
}

// foldTask reads the task's answer from the log as it stands and folds it:
// the answer, its encoder and the seq of the last event read. text is the
// prompt's text if known ("": read from its message, if it has one yet).
func (s *Server) foldTask(ctx context.Context, ref *a2aTaskRef, agent, text string) (*answerState, *a2aEnc, int64, error) {
	a := newAnswer(ref.prompt)
	if text == "" {
		if m, err := s.rd.Message(ctx, ref.conv, ref.prompt); err == nil {
			text = m.Content
		}
	}
	e := newA2AEnc(ref, text)
	seq := ref.from.Seq
	var steps []step
	for !a.ended() {
		evs, err := s.rd.Events(ctx, store.ReadEventsParams{ConversationID: ref.conv, After: seq, Limit: 500, MaxBytes: 4 << 20})
		if err != nil {
			return nil, nil, 0, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			steps = a.apply(ev, steps[:0])
			e.events(steps, a)
			seq = ev.Seq
			if a.ended() {
				break
			}
		}
	}
	if a.m != nil && a.m.AgentID != agent {
		return nil, nil, 0, taskNotFound(ref.id)
	}
	return a, e, seq, nil
}

// waitMessage is the status message of a task whose prompt waits: what it
// waits on in words, and the prompt's status (answerStatus) as a data
// part.
func (e *a2aEnc) waitMessage(status string) *a2a.Message {
	var st answerStatus
	text := "the prompt waits"
	if err := json.Unmarshal([]byte(status), &st); err == nil && st.State != "" {
		text = "the prompt is " + st.State
	}
	if w := st.WaitingOn; w != nil {
		text = "the prompt waits on a " + w.Reason
		if w.AgentID != "" {
			text += " of " + w.AgentID
		}
	}
	return &a2a.Message{MessageID: e.task.ID + "-status", ContextID: e.task.ContextID, TaskID: e.task.ID,
		Role: a2a.RoleAgent, Parts: []a2a.Part{a2a.TextPart(text), a2a.DataPart(json.RawMessage(status))}}
}
