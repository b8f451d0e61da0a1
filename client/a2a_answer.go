package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/a2a"
)

// a2aAnswer is one prompt's answer by the remote agent, relayed into the
// Reply: the task it runs as, and what of it was written.
type a2aAnswer struct {
	b    *a2aBridge
	rp   *Reply
	conv string

	contextID string
	taskID    string
	state     a2a.TaskState
	// statusText is the text of the message of the task's latest status.
	statusText string
	// statusKey names the task's latest status; asked, the status whose
	// question was answered: an agent that sends it again (the task as it
	// stood, first in the stream of the answer) asks nothing new.
	statusKey, asked string
	// message is set once the agent answered with a Message: the answer
	// is whole.
	message   bool
	artifacts map[string]*a2aArtifact
	// written is the text written so far (up to maxA2AWritten bytes), to
	// tell what a status or final message adds to it.
	written strings.Builder
}

// a2aArtifact is what was written of one artifact.
type a2aArtifact struct{ text string }

// maxA2AWritten bounds the text an answer remembers having written (a
// Parley message holds 1 MiB).
const maxA2AWritten = 2 << 20

// maxA2AArtifacts bounds the artifacts an answer follows.
const maxA2AArtifacts = 1024

// run sends the prompt and relays the answer until the task ends (nil,
// or the error a failed task ends with), going on after each question the
// agent asks.
func (a *a2aAnswer) run(ctx context.Context) error {
	msg := a.userMessage(a.rp.Prompt.Content)
	for {
		if err := a.send(ctx, msg); err != nil {
			return err
		}
		switch {
		case a.message || a.state == a2a.StateCompleted:
			return a.finalText(ctx, a.statusText)
		case a.state == a2a.StateCanceled:
			// Canceled by the agent: ended as a stop ends it.
			return a.rp.Finalize(ctx, FinalizeOptions{Reason: parley.FinishCanceled})
		case a.state == a2a.StateInputRequired:
			reply, err := a.ask(ctx)
			if err != nil {
				return err
			}
			msg = a.userMessage(reply)
		default: // failed, rejected, auth-required
			return a2aFailure(a.state, a.statusText)
		}
	}
}

// userMessage is the message that sends text to the agent, in the
// answer's context and task (once known).
func (a *a2aAnswer) userMessage(text string) *a2a.Message {
	return &a2a.Message{MessageID: uuid.NewString(), ContextID: a.contextID, TaskID: a.taskID, Role: a2a.RoleUser,
		Parts: []a2a.Part{a2a.TextPart(text)}}
}

// waits reports whether the answer is over or waits for input: sending
// or following it stops.
func (a *a2aAnswer) waits() bool {
	return a.message || a.state.Terminal() || a.state.Interrupted()
}

// send sends one message to the agent and relays what it answers, until
// the agent answered with a message, the task ended or it asks for input.
func (a *a2aAnswer) send(ctx context.Context, msg *a2a.Message) error {
	req := &a2a.SendMessageRequest{Message: msg}
	a.state = a2a.StateUnspecified
	if a.b.agent.Streaming {
		if err := a.stream(ctx, req); err != nil {
			return err
		}
	} else {
		ev, err := a.b.c.SendMessage(ctx, req)
		if err != nil {
			return fmt.Errorf("the A2A agent did not take the message: %w", err)
		}
		if err := a.apply(ctx, ev); err != nil {
			return err
		}
	}
	return a.poll(ctx)
}

// a2aStopGrace is how long a stream outlives a stop that came before the
// stream named its task, so that the task can be canceled.
const a2aStopGrace = 2 * time.Second

// stream sends the message with SendStreamingMessage and relays its
// events until the answer is whole, ends or waits for input (or the
// stream ends). A stop (ctx ending) closes the stream at once if its task
// is known, else once an event names it (then canceled by Answer) or
// a2aStopGrace has passed.
func (a *a2aAnswer) stream(ctx context.Context, req *a2a.SendMessageRequest) error {
	var known atomic.Bool
	known.Store(a.taskID != "")
	sctx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	defer context.AfterFunc(ctx, func() {
		if !known.Load() {
			t := time.NewTimer(a2aStopGrace)
			select {
			case <-t.C:
			case <-sctx.Done():
				t.Stop()
			}
		}
		cancelStream()
	})()
	s, err := a.b.c.SendStreamingMessage(sctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the A2A agent did not take the message: %w", err)
	}
	defer s.Close()
	for !a.waits() {
		ev, err := s.Next()
		if ctx.Err() != nil { // stopped: only the task is wanted now
			if err == nil && a.taskID == "" {
				a.note(eventIDs(ev))
			}
			if err != nil || a.taskID != "" {
				return ctx.Err()
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil // the stream ended with the task still at work: poll follows it
		}
		if err != nil {
			return fmt.Errorf("the A2A agent's stream: %w", err)
		}
		if err := a.apply(ctx, ev); err != nil {
			return err
		}
		known.Store(a.taskID != "")
	}
	return nil
}

// eventIDs are the task and the context an event names.
func eventIDs(ev *a2a.StreamResponse) (taskID, contextID string) {
	switch {
	case ev.Task != nil:
		return ev.Task.ID, ev.Task.ContextID
	case ev.Message != nil:
		return ev.Message.TaskID, ev.Message.ContextID
	case ev.StatusUpdate != nil:
		return ev.StatusUpdate.TaskID, ev.StatusUpdate.ContextID
	case ev.ArtifactUpdate != nil:
		return ev.ArtifactUpdate.TaskID, ev.ArtifactUpdate.ContextID
	}
	return "", ""
}

// The intervals between GetTask calls of a task still at work, and the
// bound of each call.
const (
	a2aPollFirst   = 200 * time.Millisecond
	a2aPollMax     = 5 * time.Second
	a2aCallTimeout = 30 * time.Second
)

// poll follows a task the agent left at work (a blocking send answered
// early, a stream ended before its task) with GetTask until it ends or
// asks for input.
func (a *a2aAnswer) poll(ctx context.Context) error {
	wait := a2aPollFirst
	for !a.waits() {
		if a.taskID == "" {
			return errors.New("the A2A agent's answer names no task and no message")
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, a2aPollMax)
		gctx, cancel := context.WithTimeout(ctx, a2aCallTimeout)
		task, err := a.b.c.GetTask(gctx, a.taskID)
		cancel()
		if err != nil {
			return fmt.Errorf("following the A2A agent's task: %w", err)
		}
		if err := a.apply(ctx, &a2a.StreamResponse{Task: task}); err != nil {
			return err
		}
	}
	return nil
}

// apply relays one event of the agent's answer.
func (a *a2aAnswer) apply(ctx context.Context, ev *a2a.StreamResponse) error {
	switch {
	case ev.Task != nil:
		t := ev.Task
		a.note(t.ID, t.ContextID)
		for _, art := range t.Artifacts {
			if err := a.artifact(ctx, art, false, true); err != nil {
				return err
			}
		}
		a.status(t.Status)
	case ev.Message != nil:
		m := ev.Message
		a.note(m.TaskID, m.ContextID)
		if m.TaskID == "" || m.TaskID == a.taskID {
			a.message = true
			return a.finalText(ctx, a2aText(m.Parts))
		}
	case ev.StatusUpdate != nil:
		u := ev.StatusUpdate
		a.note(u.TaskID, u.ContextID)
		a.status(u.Status)
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		a.note(u.TaskID, u.ContextID)
		return a.artifact(ctx, u.Artifact, u.Append, false)
	}
	return nil
}

// note records the task and the context the agent named, keeping the
// context for the conversation's next prompts.
func (a *a2aAnswer) note(taskID, contextID string) {
	if a.taskID == "" && taskID != "" {
		a.taskID = taskID
	}
	if contextID != "" && contextID != a.contextID {
		a.contextID = contextID
		a.b.keepContext(a.conv, contextID)
	}
}

func (a *a2aAnswer) status(s a2a.TaskStatus) {
	a.state = s.State
	a.statusText = ""
	if s.Message != nil {
		a.statusText = a2aText(s.Message.Parts)
	}
	a.statusKey = s.Timestamp + "\x00" + a.statusText
	if s.Message != nil {
		a.statusKey += "\x00" + s.Message.MessageID
	}
	if s.State.Interrupted() && a.statusKey == a.asked {
		a.state, a.statusText = a2a.StateWorking, "" // the question answered already
	}
}

// artifact relays an artifact's parts: with appendTo, more of the artifact
// sent before under the same id; whole, the artifact as a task holds it
// (what was relayed of it already is not written again); else a new
// artifact, or one that replaces what was sent under its id.
func (a *a2aAnswer) artifact(ctx context.Context, art a2a.Artifact, appendTo, whole bool) error {
	text := a2aText(art.Parts)
	seen := a.artifacts[art.ArtifactID]
	sep := "" // what goes before the text in the message
	switch {
	case seen == nil:
		if len(a.artifacts) >= maxA2AArtifacts {
			clear(a.artifacts)
		}
		seen = &a2aArtifact{}
		a.artifacts[art.ArtifactID] = seen
		if a.written.Len() > 0 && !strings.HasSuffix(a.written.String(), "\n\n") {
			sep = "\n\n" // artifacts are told apart by a blank line
		}
	case appendTo:
	case strings.HasPrefix(text, seen.text):
		text = text[len(seen.text):] // the artifact again, whole: only what it adds
	case whole || text == "":
		return nil // a snapshot that differs: the text as streamed stays
	default: // replaced: its new text follows what was said
		seen.text, sep = "", "\n\n"
	}
	if text == "" {
		return nil
	}
	if len(seen.text) < maxA2AWritten {
		seen.text += text
	}
	return a.write(ctx, sep+text)
}

// finalText writes text (a final message's, a status message's) unless
// what was written holds it already; only what it adds to the written
// text, if it starts with it.
func (a *a2aAnswer) finalText(ctx context.Context, text string) error {
	written := a.written.String()
	switch {
	case strings.TrimSpace(text) == "" || strings.Contains(written, text):
		return nil
	case strings.HasPrefix(text, written):
		return a.write(ctx, text[len(written):])
	case written != "":
		text = "\n\n" + text
	}
	return a.write(ctx, text)
}

func (a *a2aAnswer) write(ctx context.Context, text string) error {
	if text == "" {
		return nil
	}
	if a.written.Len() < maxA2AWritten {
		a.written.WriteString(text)
	}
	return tooLargeIsNoError(a.rp.Text(ctx, text))
}

// ask asks the agent's question (its status message) in Parley, and
// returns the answer as the text to send back. An expired question
// cancels the remote task and ends the answer with an error.
func (a *a2aAnswer) ask(ctx context.Context) (string, error) {
	a.asked = a.statusKey
	title, detail := a.statusText, ""
	if strings.TrimSpace(title) == "" {
		title = "The agent asks for input."
	}
	if len(title) > 1000 { // an input request's title holds 1 KiB
		title, detail = clipUTF8(title, 200)+"…", clipUTF8(title, 16000)
	}
	req := parley.InputRequest{Title: title, Detail: detail}
	if a.b.inputTTL > 0 {
		req.ExpiresAt = parley.Time{Time: time.Now().Add(a.b.inputTTL)}
	}
	answer, err := a.rp.AskQuestion(ctx, req)
	if err != nil {
		if errors.Is(err, ErrInputExpired) {
			a.cancelRemote(ctx)
			return "", errors.New("no one answered the A2A agent's question in time")
		}
		return "", err
	}
	return a2aAnswerText(answer), nil
}

// a2aAnswerText is a question's answer as text: the text typed, the
// choices made, or else the answer's JSON.
func a2aAnswerText(answer json.RawMessage) string {
	var v struct {
		Text    *string  `json:"text"`
		Choices []string `json:"choices"`
	}
	if json.Unmarshal(answer, &v) == nil {
		switch {
		case v.Text != nil:
			return *v.Text
		case len(v.Choices) > 0:
			return strings.Join(v.Choices, ", ")
		}
	}
	return string(answer)
}

// a2aText is the text of parts as a Parley message shows them: text as it
// is, data as a JSON code block, a file as a Markdown link or a line
// naming it.
func a2aText(parts []a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.Text != nil:
			b.WriteString(*p.Text)
		case p.Data != nil:
			var out bytes.Buffer
			if json.Indent(&out, p.Data, "", "  ") != nil {
				out.Reset()
				out.Write(p.Data)
			}
			fmt.Fprintf(&b, "\n```json\n%s\n```\n", out.Bytes())
		case p.URL != "":
			name := p.Filename
			if name == "" {
				name = p.URL
			}
			fmt.Fprintf(&b, "[%s](%s)", name, p.URL)
		case p.Raw != nil:
			name := p.Filename
			if name == "" {
				name = "a file"
			}
			if p.MediaType != "" {
				name += " (" + p.MediaType + ")"
			}
			if p.MediaType == "text/plain" && utf8.Valid(p.Raw) {
				b.Write(p.Raw)
				continue
			}
			fmt.Fprintf(&b, "[%s: %d bytes, not shown]", name, len(p.Raw))
		}
	}
	return b.String()
}

// clipUTF8 cuts s to at most n bytes, at a character's start.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
