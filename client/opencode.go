package client

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
)

// OpenCodeEvent is one event of OpenCode's SSE stream (/event), as far as
// the adapter needs it.
type OpenCodeEvent struct {
	Type       string `json:"type"`
	Properties struct {
		SessionID string          `json:"sessionID"`
		Part      *OpenCodePart   `json:"part"`
		Delta     string          `json:"delta"`
		MessageID string          `json:"messageID"`
		PartID    string          `json:"partID"`
		Field     string          `json:"field"`
		Error     json.RawMessage `json:"error"`
	} `json:"properties"`
}

// OpenCodePart is a part of an OpenCode message: text, tool, and others the
// adapter ignores (reasoning, step-start, snapshot, …).
type OpenCodePart struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`
	Text      string `json:"text"`
	CallID    string `json:"callID"`
	Tool      string `json:"tool"`
	State     struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output json.RawMessage `json:"output"`
		Error  string          `json:"error"`
	} `json:"state"`
}

// OpenCodeAdapter turns one OpenCode session's events into the runner
// runner protocol: text snapshots become deltas (it
// remembers what each text part has sent), newer message.part.delta events
// pass through, a delta that arrives before its part is held until the part
// appears, tool states map to statuses, session.idle finalizes, and Abort
// finalizes canceled. The assistant message is created on the first part
// with content.
type OpenCodeAdapter struct {
	Runner    *Runner
	SessionID string

	turnID string
	sent   map[string]int      // text bytes sent per part id
	held   map[string]string   // deltas that came before their part
	tools  map[string]string   // last status sent per call id
	seen   map[string]struct{} // parts announced by message.part.updated
}

// Handle applies one event. Events of other sessions are ignored.
func (a *OpenCodeAdapter) Handle(ctx context.Context, ev OpenCodeEvent) error {
	if a.sent == nil {
		a.sent, a.held, a.tools, a.seen = map[string]int{}, map[string]string{}, map[string]string{}, map[string]struct{}{}
	}
	p := ev.Properties
	session := p.SessionID
	if session == "" && p.Part != nil {
		session = p.Part.SessionID
	}
	if a.SessionID != "" && session != "" && session != a.SessionID {
		return nil
	}
	switch ev.Type {
	case "message.part.updated":
		if p.Part == nil {
			return nil
		}
		return a.part(ctx, p.Part, p.Delta)
	case "message.part.delta":
		if p.Field != "" && p.Field != "text" {
			return nil
		}
		if _, ok := a.seen[p.PartID]; !ok {
			a.held[p.PartID] += p.Delta // its part has not appeared yet
			return nil
		}
		return a.text(ctx, p.PartID, p.Delta)
	case "session.idle":
		return a.finish(ctx, parley.FinishEndTurn)
	case "session.error":
		if a.turnID == "" {
			return nil // nothing to end: the session.idle that follows ends the prompt
		}
		_, err := a.Runner.Fail(ctx, a.turnID, errorText(p.Error))
		a.reset()
		if err != nil {
			return err
		}
		_, err = a.Runner.Complete(ctx)
		return err
	}
	return nil
}

// Abort ends the response canceled, as when the user stops it.
func (a *OpenCodeAdapter) Abort(ctx context.Context) error {
	return a.finish(ctx, parley.FinishCanceled)
}

func (a *OpenCodeAdapter) part(ctx context.Context, part *OpenCodePart, delta string) error {
	switch part.Type {
	case "text":
		if _, ok := a.seen[part.ID]; !ok {
			a.seen[part.ID] = struct{}{}
			text := part.Text
			if held := a.held[part.ID]; len(held) > len(text) && strings.HasPrefix(held, text) {
				text = held // the held deltas are ahead of the snapshot
			}
			delete(a.held, part.ID)
			return a.text(ctx, part.ID, text)
		}
		if delta != "" { // the event carries the increment itself
			return a.text(ctx, part.ID, delta)
		}
		if n := a.sent[part.ID]; len(part.Text) > n {
			return a.text(ctx, part.ID, part.Text[n:]) // snapshot minus what was sent
		}
		return nil
	case "tool":
		status := part.State.Status
		if status == "" || a.tools[part.CallID] == status {
			return nil
		}
		if err := a.create(ctx); err != nil {
			return err
		}
		a.tools[part.CallID] = status
		u := ToolUpdate{CallID: part.CallID, ToolName: part.Tool, Status: status, Error: part.State.Error}
		if len(part.State.Input) > 0 && string(part.State.Input) != "null" {
			u.Args = part.State.Input
		}
		if len(part.State.Output) > 0 && string(part.State.Output) != "null" {
			u.Result = part.State.Output
		}
		_, err := a.Runner.Tool(ctx, a.turnID, u)
		return err
	}
	return nil
}

func (a *OpenCodeAdapter) text(ctx context.Context, partID, delta string) error {
	if delta == "" {
		return nil
	}
	if err := a.create(ctx); err != nil {
		return err
	}
	a.sent[partID] += len(delta)
	_, err := a.Runner.Text(ctx, a.turnID, delta)
	return err
}

// create starts the assistant message on the first content.
func (a *OpenCodeAdapter) create(ctx context.Context) error {
	if a.turnID != "" {
		return nil
	}
	a.turnID = uuid.NewString()
	_, err := a.Runner.Create(ctx, a.turnID)
	return err
}

// finish ends the response and the prompt it answers, even when nothing
// was said (then there is no message to finalize, but the prompt must still
// end, or the queue would wait for it).
func (a *OpenCodeAdapter) finish(ctx context.Context, reason string) error {
	said := a.turnID != ""
	var err error
	switch {
	case reason == parley.FinishCanceled:
		_, err = a.Runner.Aborted(ctx) // ends the prompt too
		a.reset()
		return err
	case said:
		_, err = a.Runner.Finalize(ctx, a.turnID, reason, "")
	}
	a.reset()
	if err != nil {
		return err
	}
	_, err = a.Runner.Complete(ctx)
	return err
}

func (a *OpenCodeAdapter) reset() {
	a.turnID = ""
	a.sent, a.held, a.tools, a.seen = map[string]int{}, map[string]string{}, map[string]string{}, map[string]struct{}{}
}

func errorText(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &e) == nil && (e.Data.Message != "" || e.Name != "") {
		return strings.TrimSpace(e.Name + ": " + e.Data.Message)
	}
	return "the agent failed"
}
