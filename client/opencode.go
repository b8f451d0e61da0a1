package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
)

// OpenCodeEvent is one event of an OpenCode server's event stream
// (GET /event), each sent as an SSE data line {"id","type","properties"}.
type OpenCodeEvent struct {
	ID         string             `json:"id,omitempty"`
	Type       string             `json:"type"`
	Properties OpenCodeProperties `json:"properties"`

	ask *openCodeAsk // what a permission or question event asks (ServeOpenCode relays it)
	// replied is the permission or question a permission.replied,
	// question.replied or question.rejected event says was answered.
	replied string
}

// OpenCodeProperties are the properties of the events the adapter follows:
//
//	message.updated       sessionID, info (the message)
//	message.part.updated  sessionID, part (the whole part as it is now)
//	message.part.delta    sessionID, messageID, partID, field, delta (text appended to a part)
//	session.status        sessionID, status ({"type":"busy"}, {"type":"idle"}, {"type":"retry",…})
//	session.idle          sessionID
//	session.error         sessionID, error ({"name","data":{"message",…}})
type OpenCodeProperties struct {
	SessionID string           `json:"sessionID,omitempty"`
	Info      *OpenCodeMessage `json:"info,omitempty"`
	Part      *OpenCodePart    `json:"part,omitempty"`
	MessageID string           `json:"messageID,omitempty"`
	PartID    string           `json:"partID,omitempty"`
	Field     string           `json:"field,omitempty"`
	Delta     string           `json:"delta,omitempty"`
	Status    *OpenCodeStatus  `json:"status,omitempty"`
	Error     *OpenCodeError   `json:"error,omitempty"`
}

// OpenCodeMessage is an OpenCode message as far as the adapter reads it:
// a user message is a prompt; an assistant message answers the user
// message named by ParentID (one prompt may take several, one per step).
type OpenCodeMessage struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionID"`
	Role      string         `json:"role"`
	ParentID  string         `json:"parentID,omitempty"`
	Finish    string         `json:"finish,omitempty"`
	Error     *OpenCodeError `json:"error,omitempty"`
}

// OpenCodePart is a part of an OpenCode message: text, tool, and others
// the adapter leaves out (reasoning, step-start, step-finish, patch, …).
type OpenCodePart struct {
	ID        string            `json:"id"`
	SessionID string            `json:"sessionID"`
	MessageID string            `json:"messageID"`
	Type      string            `json:"type"`
	Text      string            `json:"text,omitempty"`
	CallID    string            `json:"callID,omitempty"`
	Tool      string            `json:"tool,omitempty"`
	State     OpenCodeToolState `json:"state"`
}

// OpenCodeToolState is a tool part's state: Status is pending, running,
// completed (with Output) or error (with Error).
type OpenCodeToolState struct {
	Status string          `json:"status,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	Title  string          `json:"title,omitempty"`
}

// OpenCodeStatus is a session's status: busy, idle or retry.
type OpenCodeStatus struct {
	Type    string `json:"type"`
	Attempt int    `json:"attempt,omitempty"`
	Message string `json:"message,omitempty"`
}

// OpenCodeError is an error OpenCode reports, such as
// {"name":"APIError","data":{"message":"…"}}; a stopped answer reports
// MessageAbortedError.
type OpenCodeError struct {
	Name string `json:"name"`
	Data struct {
		Message string `json:"message,omitempty"`
	} `json:"data"`
}

// Error returns the error's name and message.
func (e *OpenCodeError) Error() string {
	switch {
	case e.Data.Message == "":
		return e.Name
	case e.Name == "":
		return e.Data.Message
	}
	return e.Name + ": " + e.Data.Message
}

// OpenCodeAdapter relays what one OpenCode session answers to a prompt
// as one Parley message, over a Runner. Call PromptedAs (or Prompted) when
// a prompt has been sent to the session, then Handle with each event of
// OpenCode's event stream. The answer is what the session replies to the
// prompt's user message: the text and tool parts of the assistant messages
// whose parentID is that message (other sessions, other messages and other
// part kinds are left out). OpenCode sends a session's user messages again
// while it works (at each step and after it goes idle), so the prompt's
// message is known by the id the prompt was sent with (PromptedAs); with
// Prompted, it is the first user message recorded after it that the
// adapter has not seen before. Text deltas are relayed as they come; a
// part's whole text (message.part.updated) adds only what the deltas have
// not said. Tool states map to Parley's tool statuses of the same names.
// The answer ends when the session goes idle after it went busy: complete
// (end_turn), or with an error part after a session.error, or canceled
// after a MessageAbortedError; the prompt ends with it. ServeOpenCode does
// all of this; use the adapter directly to send the prompts some other way.
type OpenCodeAdapter struct {
	// Runner is the Parley runner connection the answer goes to.
	Runner *Runner
	// SessionID is the OpenCode session whose events are followed.
	SessionID string

	phase    int
	userID   string            // the user message of the prompt
	named    bool              // userID was given by PromptedAs
	seen     map[string]bool   // the user messages of earlier prompts
	ours     map[string]bool   // the assistant messages that answer it
	kinds    map[string]string // part id → part type, of those messages
	sent     map[string]string // text relayed per text part
	held     map[string]string // deltas that came before their part
	tools    map[string]string // last status relayed per call id
	failure  *OpenCodeError    // the session.error of this answer
	stopping bool              // the session was asked to abort
	turnID   string            // the Parley message, once created
}

// The phases of an answer.
const (
	ocNone     = iota // no prompt sent
	ocSent            // the prompt was sent; OpenCode has not recorded it
	ocRecorded        // OpenCode recorded the prompt as a user message
	ocBusy            // and has been busy since
)

// Prompted starts a new answer: a prompt has just been sent to the
// session, with no message id of its own. Its message is taken to be the
// first user message OpenCode records after this that the adapter has not
// seen before; PromptedAs ties the answer to its prompt exactly. Call it
// once the previous answer has ended.
func (a *OpenCodeAdapter) Prompted() {
	a.reset()
	a.phase = ocSent
}

// PromptedAs starts a new answer: a prompt has just been sent to the
// session as the user message messageID (the messageID of OpenCode's
// prompt_async body, such as NewOpenCodeMessageID gives). The answer is
// then exactly the assistant messages whose parentID is messageID. Call it
// once the previous answer has ended.
func (a *OpenCodeAdapter) PromptedAs(messageID string) {
	a.reset()
	a.phase, a.userID, a.named = ocSent, messageID, true
}

// Handle applies one event of OpenCode's event stream. Events of other
// sessions, and events while no prompt is answered, change nothing.
func (a *OpenCodeAdapter) Handle(ctx context.Context, ev OpenCodeEvent) error {
	p := &ev.Properties
	if eventSession(ev) != a.SessionID {
		return nil
	}
	if a.phase == ocNone {
		if m := p.Info; ev.Type == "message.updated" && m != nil && m.Role == "user" {
			a.see(m.ID) // a message no prompt of ours sent
		}
		return nil
	}
	switch ev.Type {
	case "message.updated":
		if m := p.Info; m != nil {
			switch {
			case m.Role == "user" && a.phase == ocSent && a.named:
				if m.ID == a.userID {
					a.phase = ocRecorded
				}
			case m.Role == "user" && a.phase == ocSent && !a.seen[m.ID]:
				a.userID, a.phase = m.ID, ocRecorded
			case m.Role == "user" && m.ID != a.userID:
				a.see(m.ID)
			case m.Role == "assistant" && a.phase >= ocRecorded && m.ParentID == a.userID:
				a.ours[m.ID] = true
			}
		}
	case "message.part.updated":
		if p.Part != nil && a.ours[p.Part.MessageID] {
			return a.part(ctx, p.Part)
		}
	case "message.part.delta":
		if a.ours[p.MessageID] && p.Field == "text" {
			switch a.kinds[p.PartID] {
			case "text":
				return a.text(ctx, p.PartID, p.Delta)
			case "": // its part has not appeared yet
				a.held[p.PartID] += p.Delta
			}
		}
	case "session.status":
		switch {
		case p.Status == nil:
		case p.Status.Type == "busy" && a.phase == ocRecorded:
			a.phase = ocBusy
		case p.Status.Type == "idle":
			return a.idle(ctx)
		}
	case "session.idle":
		return a.idle(ctx)
	case "session.error":
		// A context overflow is not the end: OpenCode compacts and goes on.
		if p.Error != nil && p.Error.Name != "ContextOverflowError" && a.phase >= ocRecorded {
			a.failure = p.Error
		}
	}
	return nil
}

// Abort ends the answer canceled now, and the prompt with it, as when the
// user stops it and OpenCode cannot be asked to stop.
func (a *OpenCodeAdapter) Abort(ctx context.Context) error {
	a.reset()
	_, err := a.Runner.Aborted(ctx)
	return err
}

// eventSession is the session an event is about.
func eventSession(ev OpenCodeEvent) string {
	p := &ev.Properties
	switch {
	case p.SessionID != "":
		return p.SessionID
	case p.Part != nil:
		return p.Part.SessionID
	case p.Info != nil:
		return p.Info.SessionID
	}
	return ""
}

// answering reports whether an answer is under way.
func (a *OpenCodeAdapter) answering() bool { return a.phase != ocNone }

// stop notes that the session was asked to abort: the answer ends
// canceled when the session goes idle.
func (a *OpenCodeAdapter) stop() { a.stopping = true }

// idle ends the answer if the session went idle after working on it (or
// after it was asked to stop): an idle before that is the end of earlier work.
func (a *OpenCodeAdapter) idle(ctx context.Context) error {
	if a.phase != ocBusy && !a.stopping {
		return nil
	}
	switch {
	case a.stopping || a.failure != nil && a.failure.Name == "MessageAbortedError":
		return a.Abort(ctx)
	case a.failure != nil:
		return a.fail(ctx, a.failure.Error())
	}
	turnID := a.turnID
	a.reset()
	if turnID != "" {
		if _, err := a.Runner.Finalize(ctx, turnID, parley.FinishEndTurn, ""); err != nil {
			return err
		}
	}
	_, err := a.Runner.Complete(ctx)
	return err
}

// fail ends the answer with an error part, and the prompt with it.
func (a *OpenCodeAdapter) fail(ctx context.Context, message string) error {
	err := a.create(ctx)
	turnID := a.turnID
	a.reset()
	if err != nil {
		return err
	}
	if _, err := a.Runner.Fail(ctx, turnID, message); err != nil {
		return err
	}
	_, err = a.Runner.Complete(ctx)
	return err
}

func (a *OpenCodeAdapter) part(ctx context.Context, part *OpenCodePart) error {
	a.kinds[part.ID] = part.Type
	switch part.Type {
	case "text":
		text := part.Text
		if held, ok := a.held[part.ID]; ok {
			delete(a.held, part.ID)
			if len(held) > len(text) && strings.HasPrefix(held, text) {
				text = held // the deltas are ahead of the part
			}
		}
		// The whole text adds what the deltas have not said. A text that
		// no longer starts with what was relayed (a plugin rewrote it)
		// adds nothing: what was relayed stays.
		if sent := a.sent[part.ID]; strings.HasPrefix(text, sent) {
			return a.text(ctx, part.ID, text[len(sent):])
		}
	case "tool":
		delete(a.held, part.ID)
		status := part.State.Status
		if status == "" || a.tools[part.CallID] == status {
			return nil // the same status again (its title or metadata changed)
		}
		a.tools[part.CallID] = status
		u := ToolUpdate{CallID: part.CallID, ToolName: part.Tool, Status: status, Error: part.State.Error}
		if status != parley.ToolPending && isValue(part.State.Input) {
			u.Args = part.State.Input // a pending call's input is {} until the model has sent it
		}
		if isValue(part.State.Output) {
			u.Result = part.State.Output
		}
		if len(u.Result) > maxToolOutput { // a frame that large would close the runner connection
			u.Result, _ = json.Marshal(fmt.Sprintf("[%d bytes of output left out: too large for a Parley message]", len(part.State.Output)))
		}
		if err := a.create(ctx); err != nil {
			return err
		}
		_, err := a.Runner.Tool(ctx, a.turnID, u)
		if parley.ErrorCode(err) == parley.ETOOLARGE && (u.Args != nil || u.Result != nil) {
			u.Args, u.Result = nil, nil // too large for the message: the status still goes
			_, err = a.Runner.Tool(ctx, a.turnID, u)
		}
		return tooLargeIsNoError(err)
	default:
		delete(a.held, part.ID) // a reasoning part's deltas are not relayed
	}
	return nil
}

// maxToolOutput bounds the output of a tool call that is relayed (a
// Parley message holds 1 MiB in all).
const maxToolOutput = 256 << 10

func isValue(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func (a *OpenCodeAdapter) text(ctx context.Context, partID, delta string) error {
	if delta == "" {
		return nil
	}
	if err := a.create(ctx); err != nil {
		return err
	}
	a.sent[partID] += delta
	_, err := a.Runner.Text(ctx, a.turnID, delta)
	return tooLargeIsNoError(err)
}

// tooLargeIsNoError drops Parley's too_large: the message holds what it
// may, and the answer goes on without what would not fit.
func tooLargeIsNoError(err error) error {
	if parley.ErrorCode(err) == parley.ETOOLARGE {
		return nil
	}
	return err
}

// create starts the Parley message on the answer's first content, tied to
// the OpenCode session that writes it (its metadata names the session).
func (a *OpenCodeAdapter) create(ctx context.Context) error {
	if a.turnID != "" {
		return nil
	}
	a.turnID = uuid.NewString()
	_, err := a.Runner.CreateWith(ctx, a.turnID, CreateOptions{OpenCodeSessionID: a.SessionID})
	return err
}

// maxSeen bounds how many user messages of earlier prompts the adapter
// remembers (OpenCode sends those of its latest steps again).
const maxSeen = 1024

// see notes a user message that is not the prompt's: a later Prompted
// does not take it for its own.
func (a *OpenCodeAdapter) see(id string) {
	if a.seen == nil || len(a.seen) >= maxSeen {
		a.seen = map[string]bool{}
	}
	a.seen[id] = true
}

func (a *OpenCodeAdapter) reset() {
	if a.userID != "" {
		a.see(a.userID)
	}
	a.phase, a.userID, a.named, a.turnID, a.failure, a.stopping = ocNone, "", false, "", nil, false
	a.ours, a.kinds, a.sent, a.held, a.tools = map[string]bool{}, map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
}
