package protocols

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/parleyhq/parley"
)

// The answer follower: what the chat protocols (the AI SDK's UI message
// stream, AG-UI) show of one prompt is its answer, read from the
// conversation's log and nothing else. An answerState folds the log's events
// into the answer as the server holds it (the same rules as every client's
// fold, parley.Message.AppendText and ApplyTool) and says, step by step, what
// changed since the last event: a text part started, grew or ended, a tool
// call started, got its input or its outcome, the answer ended. Each
// protocol is an encoder of these steps (chat.go, agui.go), and the steps
// depend only on the events, so that a stream built from the log again from
// the same point says exactly what the first said.
//
// A runner that fails over ends its message with an error and, keeping the
// prompt, answers again in a new message that names the failed one in
// retryOf: the person asked one question, and its answer is the retry. So
// the answer to a prompt is followed through its attempts: an attempt that
// ends with an error is held, and the answer goes on in the message that
// retries it (a stepStart with retry set), or ends with that error once
// the prompt ends without a retry.

// stepKind names what changed in the answer.
type stepKind int

const (
	// stepStart: the answer's message exists (step.id is its id), or the
	// prompt ended without one (step.id is "", and a stepFinish follows).
	// With step.retry, the answer goes on in message step.id, which
	// retries the attempt that failed.
	stepStart stepKind = iota
	stepTextStart
	stepTextDelta
	stepTextEnd
	// stepToolStart: a tool call appeared (step.part holds it).
	stepToolStart
	// stepToolInput: its input is known (its args, or none).
	stepToolInput
	// stepToolOutput: it completed (step.part.Result).
	stepToolOutput
	// stepToolError: it failed (step.part.Error).
	stepToolError
	// stepFinish: the answer ended (step.end says how; step.text is the
	// error's text for endError).
	stepFinish
	// stepStatus: the prompt's status while its answer has not begun
	// (step.text is an answerStatus in JSON; see answer_status.go). Not
	// from the log: it goes out as a transient frame.
	stepStatus
	// stepInput: an input request was opened (step.input holds it,
	// pending; see answer_input.go).
	stepInput
	// stepInputEnd: it ended (step.input holds how).
	stepInputEnd
	// stepToolDenied: the approval of tool call step.id was denied (or
	// expired; step.input is the approval): the call has no outcome.
	stepToolDenied
)

// answerEnd is how an answer ended.
type answerEnd string

const (
	endComplete answerEnd = "complete"
	endCanceled answerEnd = "canceled" // stopped, aborted, reverted, or the prompt was withdrawn
	endError    answerEnd = "error"
)

// step is one change of the answer.
type step struct {
	kind stepKind
	// id is the answer's message id (stepStart), the text part's id (text
	// steps) or the tool call's id (tool steps).
	id   string
	text string       // a text delta, or an error's text
	part *parley.Part // the tool call, as it is now
	end  answerEnd
	// retry marks the stepStart of a retry: not the answer's first message.
	retry bool
	// input is the input request of stepInput, stepInputEnd and
	// stepToolDenied.
	input *inputReq
}

// answerState is one answer, folded from the log. Its zero value is not
// usable: make it with newAnswer or answerOfMessage.
type answerState struct {
	// prompt is the prompt (and the id of its user message) whose answer
	// this is: the first message other than the user's that replies to it
	// or belongs to its exchange. Empty when following a given message.
	prompt string
	// want is the answer's message id when it is known beforehand.
	want string
	m    *parley.Message
	// sent is, for each text part of m by index, how many bytes of it were
	// stepped and whether it was started and ended.
	sent  map[int]*textSent
	tools map[string]*toolSent
	done  bool
	// attempt counts the retries followed: m is the attempt-th retry.
	attempt int
	// failed holds the error of attempt m while a retry may follow it:
	// until the prompt ends (promptEnded).
	failed      *string
	promptEnded bool
	// tombstone is the seq of the last compacted event folded (0: none).
	tombstone int64
	// status is the last status stepped (stepStatus), "" if none.
	status string
	// inputs are the input requests of m, in the order they were opened.
	inputs []*inputSent
}

type textSent struct {
	started, ended bool
	bytes          int
}

// toolSent is what was stepped of a tool call; synthetic marks a call an
// approval brought (answer_input.go) that the message does not hold.
type toolSent struct{ input, output, synthetic bool }

// newAnswer follows the answer to prompt promptID.
func newAnswer(promptID string) *answerState {
	return &answerState{prompt: promptID, sent: map[int]*textSent{}, tools: map[string]*toolSent{}}
}

// answerOfMessage follows message id, an answer that exists already.
func answerOfMessage(id string) *answerState {
	return &answerState{want: id, sent: map[int]*textSent{}, tools: map[string]*toolSent{}}
}

// again returns a new follower of the same answer, from its start.
func (a *answerState) again() *answerState {
	if a.prompt != "" {
		return newAnswer(a.prompt)
	}
	return answerOfMessage(a.want)
}

// ended reports whether the answer has ended (a stepFinish was stepped).
func (a *answerState) ended() bool { return a.done }

// apply folds one event of the log into the answer and appends to out the
// steps it made.
func (a *answerState) apply(ev parley.Event, out []step) []step {
	if a.done {
		return out
	}
	switch ev.Type {
	case parley.EventCompacted:
		// Retention compacted a delta here: the message.updated that ends
		// its message brings what it held, so the steps it made then move
		// there.
		a.tombstone = ev.Seq
	case parley.EventMessage, parley.EventMessageUpdated:
		return a.applyMessage(ev, out)
	case parley.EventChunk:
		var ch parley.Chunk
		if a.m != nil && json.Unmarshal(ev.Data, &ch) == nil && ch.MessageID == a.m.ID {
			a.m.AppendText(ch.Content)
			return a.diff(out)
		}
	case parley.EventPartUpdated:
		return a.applyPartUpdate(ev.Data, out)
	case eventInputAnswered:
		return a.applyInputEnded(ev.Data, out)
	case parley.EventMessagesRemoved:
		var r parley.MessagesRemoved
		if json.Unmarshal(ev.Data, &r) != nil {
			return out
		}
		if a.m != nil && slices.Contains(r.MessageIDs, a.m.ID) || a.prompt != "" && slices.Contains(r.MessageIDs, a.prompt) {
			return a.finish(out, endCanceled, "")
		}
	case parley.EventPromptCompleted, parley.EventPromptCanceled:
		return a.applyPromptEnd(ev, out)
	}
	return out
}

// applyMessage folds a message or message.updated event: the answer's
// start, its next state, or its retry.
func (a *answerState) applyMessage(ev parley.Event, out []step) []step {
	var m parley.Message
	if json.Unmarshal(ev.Data, &m) != nil {
		return out
	}
	switch {
	case a.m == nil:
		if !a.answers(&m) {
			return out
		}
		out = append(out, step{kind: stepStart, id: m.ID})
	case m.ID == a.m.ID:
	case a.failed != nil && (m.RetryOf == a.m.ID || a.answers(&m)):
		// The attempt that failed is retried: the answer goes on in the
		// retry, whose parts are new ones.
		a.attempt++
		a.failed, a.sent, a.tools, a.inputs = nil, map[int]*textSent{}, map[string]*toolSent{}, nil
		out = append(out, step{kind: stepStart, id: m.ID, retry: true})
	default:
		return out
	}
	a.m = &m
	return a.diff(a.applyMessageInputs(ev.Data, out))
}

// applyPromptEnd folds the end of the prompt followed: a prompt that ends
// before its answer begins has none; one whose answer streams on is
// followed to the answer's end.
func (a *answerState) applyPromptEnd(ev parley.Event, out []step) []step {
	var p struct {
		ID string `json:"id"`
	}
	if a.prompt == "" || json.Unmarshal(ev.Data, &p) != nil || p.ID != a.prompt {
		return out
	}
	a.promptEnded = true
	switch {
	case a.failed != nil:
		// No retry came: the answer ends with its attempt's error.
		return a.finish(out, endError, *a.failed)
	case a.m == nil:
		out = append(out, step{kind: stepStart})
		end := endComplete
		if ev.Type == parley.EventPromptCanceled {
			end = endCanceled
		}
		return a.finish(out, end, "")
	}
	return out
}

// answers reports whether m is the answer followed.
func (a *answerState) answers(m *parley.Message) bool {
	if a.want != "" {
		return m.ID == a.want
	}
	return m.Role != parley.RoleUser && m.ID != a.prompt && (m.ReplyTo == a.prompt || m.TurnID == a.prompt)
}

// textID names text part i of the answer's message in the steps: "t<i>",
// and "r<k>t<i>" in its k-th retry.
func (a *answerState) textID(i int) string {
	if a.attempt == 0 {
		return "t" + strconv.Itoa(i)
	}
	return "r" + strconv.Itoa(a.attempt) + "t" + strconv.Itoa(i)
}

// diff appends the steps that bring what was stepped up to the answer as
// it is now, part by part in order: so a text part ends before the tool
// call after it starts.
func (a *answerState) diff(out []step) []step {
	m := a.m
	final := m.Status != parley.StatusStreaming
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Type {
		case parley.PartText:
			t := a.sent[i]
			if t == nil {
				t = &textSent{}
				a.sent[i] = t
			}
			if t.ended {
				continue
			}
			if !t.started {
				t.started = true
				out = append(out, step{kind: stepTextStart, id: a.textID(i)})
			}
			// Text only grows while it streams; a text a finalize made
			// shorter (none does) would send nothing more.
			if len(p.Text) > t.bytes {
				out = append(out, step{kind: stepTextDelta, id: a.textID(i), text: p.Text[t.bytes:]})
				t.bytes = len(p.Text)
			}
			if !p.Streaming || final {
				t.ended = true
				out = append(out, step{kind: stepTextEnd, id: a.textID(i)})
			}
		case parley.PartToolCall:
			t := a.tools[p.CallID]
			if t == nil {
				t = &toolSent{}
				a.tools[p.CallID] = t
				out = append(out, step{kind: stepToolStart, id: p.CallID, part: clonePart(p)})
			}
			if !t.input && (p.Args != nil || p.Status != parley.ToolPending || final) {
				t.input = true
				out = append(out, step{kind: stepToolInput, id: p.CallID, part: clonePart(p)})
			}
			if !t.output && (p.Status == parley.ToolCompleted || p.Status == parley.ToolError) {
				t.output = true
				kind := stepToolOutput
				if p.Status == parley.ToolError {
					kind = stepToolError
				}
				out = append(out, step{kind: kind, id: p.CallID, part: clonePart(p)})
			}
		}
	}
	if !final {
		return out
	}
	switch m.Status {
	case parley.StatusCanceled:
		return a.finish(out, endCanceled, "")
	case parley.StatusError:
		text := "the answer ended with an error"
		for _, p := range m.Parts {
			if p.Type == parley.PartError && p.Message != "" {
				text = p.Message
			}
		}
		if a.prompt != "" && !a.promptEnded {
			// Its runner keeps the prompt: it may retry (a failover).
			a.failed = &text
			return a.closeParts(out)
		}
		return a.finish(out, endError, text)
	}
	return a.finish(out, endComplete, "")
}

// finish ends the answer: every text part and tool call still open is
// closed first, so that every protocol's stream ends well formed.
func (a *answerState) finish(out []step, end answerEnd, text string) []step {
	out = a.closeParts(out)
	out = a.closeCalls(out)
	a.done = true
	return append(out, step{kind: stepFinish, end: end, text: text})
}

// closeParts closes every text part and tool call of the message that is
// still open.
func (a *answerState) closeParts(out []step) []step {
	if a.m == nil {
		return out
	}
	for i := range a.m.Parts {
		p := &a.m.Parts[i]
		if t := a.sent[i]; p.Type == parley.PartText && t != nil && t.started && !t.ended {
			t.ended = true
			out = append(out, step{kind: stepTextEnd, id: a.textID(i)})
		}
		if t := a.tools[p.CallID]; p.Type == parley.PartToolCall && t != nil && !t.input {
			t.input = true
			out = append(out, step{kind: stepToolInput, id: p.CallID, part: clonePart(p)})
		}
	}
	return out
}

func clonePart(p *parley.Part) *parley.Part {
	c := *p
	return &c
}
