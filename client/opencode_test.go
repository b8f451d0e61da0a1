package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// The recorded OpenCode event streams in testdata (opencode_*.sse) are
// written as OpenCode's server sends them on GET /event: one SSE data line
// per event, {"id","type","properties"}, with the shapes of its message,
// part and session events.
const openCodeSession = "ses_8c2f14d7affeR3mQ9vX1kT7bNz"

// recordedOpenCode reads a recorded stream: its events in order, and how
// many of them come before the comment that marks where the session is
// aborted (all of them if it has none).
func recordedOpenCode(t *testing.T, name string) (evs []client.OpenCodeEvent, beforeAbort int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	beforeAbort = -1
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, ": the session is aborted here") {
			beforeAbort = len(evs)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev client.OpenCodeEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%s: %v in %s", name, err, data)
		}
		evs = append(evs, ev)
	}
	if beforeAbort < 0 {
		beforeAbort = len(evs)
	}
	return evs, beforeAbort
}

// openCodeRun is what one replay left in a real Parley server.
type openCodeRun struct {
	answers []*parley.Message // the runner's messages
	ends    []string          // how the prompts ended: prompt.completed, prompt.canceled
}

// replayOpenCode gives the runner of a new conversation one prompt, then
// feeds the events through an OpenCodeAdapter, as if OpenCode had sent
// them after that prompt.
func replayOpenCode(t *testing.T, evs ...client.OpenCodeEvent) openCodeRun {
	t.Helper()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "opencode")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := c.Ask(ctx, id, "human", "the question", ""); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Next(ctx); err != nil || p.Type != "prompt" {
		t.Fatalf("runner got %+v, %v; want the prompt", p, err)
	}
	a := &client.OpenCodeAdapter{Runner: r, SessionID: openCodeSession}
	a.Prompted()
	for _, ev := range evs {
		if err := a.Handle(ctx, ev); err != nil {
			t.Fatalf("handling %s: %v", ev.Type, err)
		}
	}
	return conversationRun(ctx, t, c, id)
}

// conversationRun reads the runner's messages and the prompts' ends.
func conversationRun(ctx context.Context, t *testing.T, c *client.Client, id string) openCodeRun {
	t.Helper()
	var run openCodeRun
	msgs, err := c.AllMessages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.AgentID == "opencode" {
			run.answers = append(run.answers, m)
		}
	}
	evs, _, err := c.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == "prompt.completed" || e.Type == "prompt.canceled" {
			run.ends = append(run.ends, e.Type)
		}
	}
	return run
}

// shape describes a message in one line: its status, then each part as
// type(status or reason)=text, error or result.
func shape(m *parley.Message) string {
	s := []string{string(m.Status)}
	for _, p := range m.Parts {
		switch p.Type {
		case parley.PartText:
			s = append(s, "text="+p.Text)
		case parley.PartToolCall:
			s = append(s, "tool("+p.ToolName+" "+p.Status+")="+string(p.Args)+" "+string(p.Result)+p.Error)
		case parley.PartError:
			s = append(s, "error="+p.Message)
		case parley.PartFinish:
			s = append(s, "finish("+p.Reason+")")
		}
	}
	return strings.Join(s, " | ")
}

func checkRun(t *testing.T, run openCodeRun, ends string, shapes ...string) {
	t.Helper()
	if got := strings.Join(run.ends, " "); got != ends {
		t.Errorf("the prompts ended with %q, want %q", got, ends)
	}
	if len(run.answers) != len(shapes) {
		t.Fatalf("%d messages, want %d", len(run.answers), len(shapes))
	}
	for i, m := range run.answers {
		if got := shape(m); got != shapes[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, got, shapes[i])
		}
	}
}

// The shapes the recorded streams leave in Parley.
const (
	answerShape = "complete | text=It declares `example.com/app`, with Go 1.26. | finish(end_turn)"
	toolsShape  = "complete | text=I'll read both files." +
		` | tool(read completed)={"filePath":"/work/app/go.mod"} "\u003cfile\u003e\n00001| module example.com/app\n00002| \n00003| go 1.26\n\u003c/file\u003e"` +
		` | tool(read error)={"filePath":"/work/app/missing.go"} Error: File not found: /work/app/missing.go` +
		" | text=go.mod declares `example.com/app`; missing.go does not exist. | finish(end_turn)"
	abortedShape = `canceled | text=Running the tests now. | tool(bash error)={"command":"go test ./...","description":"Runs the tests"} ` +
		parleyCanceledTool + " | finish(canceled)"
	errorShape = "error | text=The README describes a conversation server" +
		" | error=APIError: Output blocked by content filtering policy | finish(error)"
)

// parleyCanceledTool is the error Parley gives a tool call still running
// when its message ends.
const parleyCanceledTool = "the response ended before the tool call finished"

func TestOpenCodePlainAnswer(t *testing.T) {
	t.Parallel()
	evs, _ := recordedOpenCode(t, "opencode_answer.sse")
	checkRun(t, replayOpenCode(t, evs...), "prompt.completed", answerShape)
}

// TestOpenCodeToolCalls: one call completes, the other errors; the
// reasoning, another session going idle and a running call's new title
// are left out; the two steps make one message.
func TestOpenCodeToolCalls(t *testing.T) {
	t.Parallel()
	evs, _ := recordedOpenCode(t, "opencode_tools.sse")
	checkRun(t, replayOpenCode(t, evs...), "prompt.completed", toolsShape)
}

// TestOpenCodeAbortedAnswer: OpenCode stops (MessageAbortedError), and the
// answer ends canceled with what it said, and its prompt with it.
func TestOpenCodeAbortedAnswer(t *testing.T) {
	t.Parallel()
	evs, _ := recordedOpenCode(t, "opencode_aborted.sse")
	checkRun(t, replayOpenCode(t, evs...), "prompt.canceled", abortedShape)
}

// TestOpenCodeSessionError: a session.error ends the answer with an error
// part when the session goes idle; a retry before it changes nothing; the
// prompt is complete.
func TestOpenCodeSessionError(t *testing.T) {
	t.Parallel()
	evs, _ := recordedOpenCode(t, "opencode_error.sse")
	checkRun(t, replayOpenCode(t, evs...), "prompt.completed", errorShape)
}

// TestOpenCodeLeavesOutTheEndOfEarlierWork: what an earlier answer sends
// after the session first went idle (its last parts, its message, idles
// again) comes after the next prompt was sent; none of it is taken for
// the new answer, which ends at its own idle.
func TestOpenCodeLeavesOutTheEndOfEarlierWork(t *testing.T) {
	t.Parallel()
	var evs []client.OpenCodeEvent
	for _, name := range []string{"opencode_error.sse", "opencode_aborted.sse"} {
		all, _ := recordedOpenCode(t, name)
		for i, ev := range all {
			if ev.Type == "session.idle" {
				evs = append(evs, all[i+1:]...) // what comes after the first idle
				break
			}
		}
	}
	answer, _ := recordedOpenCode(t, "opencode_answer.sse")
	checkRun(t, replayOpenCode(t, append(evs, answer...)...), "prompt.completed", answerShape)
}

// TestOpenCodeTextDeltasBeforeTheirPart: deltas that come before their
// part's first message.part.updated are held, and the part's whole text
// adds only what they have not said.
func TestOpenCodeTextDeltasBeforeTheirPart(t *testing.T) {
	t.Parallel()
	evs, _ := recordedOpenCode(t, "opencode_answer.sse")
	var moved []client.OpenCodeEvent
	var start client.OpenCodeEvent
	for _, ev := range evs {
		if p := ev.Properties.Part; ev.Type == "message.part.updated" && p.Type == "text" && p.Text == "" {
			start = ev // the part's empty start goes after its first delta
			continue
		}
		moved = append(moved, ev)
		if ev.Type == "message.part.delta" && start.Type != "" {
			moved, start = append(moved, start), client.OpenCodeEvent{}
		}
	}
	checkRun(t, replayOpenCode(t, moved...), "prompt.completed", answerShape)
}

// TestOpenCodeToolOutputTooLargeForTheMessage: a tool's output too large
// for a Parley message is left out, saying so; the call's status and the
// rest of the answer are kept.
func TestOpenCodeToolOutputTooLargeForTheMessage(t *testing.T) {
	t.Parallel()
	evs, _ := recordedOpenCode(t, "opencode_tools.sse")
	huge, _ := json.Marshal(strings.Repeat("x", 1<<20))
	for i, ev := range evs {
		if p := ev.Properties.Part; p != nil && p.Type == "tool" && p.State.Status == "completed" {
			big := *p
			big.State.Output = huge
			evs[i].Properties.Part = &big
		}
	}
	want := strings.Replace(toolsShape, `tool(read completed)={"filePath":"/work/app/go.mod"} "\u003cfile\u003e\n00001| module example.com/app\n00002| \n00003| go 1.26\n\u003c/file\u003e"`,
		`tool(read completed)={"filePath":"/work/app/go.mod"} "[1048578 bytes of output left out: too large for a Parley message]"`, 1)
	checkRun(t, replayOpenCode(t, evs...), "prompt.completed", want)
}

// TestOpenCodeToolOutputsFillTheMessage: once tool outputs have filled the
// message, a call's output is left out but its status is kept, and the
// answer goes on.
func TestOpenCodeToolOutputsFillTheMessage(t *testing.T) {
	t.Parallel()
	all, _ := recordedOpenCode(t, "opencode_tools.sse")
	output, _ := json.Marshal(strings.Repeat("y", 200<<10))
	var evs []client.OpenCodeEvent
	for _, ev := range all {
		evs = append(evs, ev)
		if p := ev.Properties.Part; p != nil && p.Type == "tool" && p.State.Status == "completed" {
			for k := range 6 { // six more reads of 200 KiB each
				big := *p
				big.ID, big.CallID, big.State.Output = fmt.Sprintf("prt_big%d", k), fmt.Sprintf("toolu_big%d", k), output
				evs = append(evs, client.OpenCodeEvent{Type: ev.Type, Properties: client.OpenCodeProperties{SessionID: openCodeSession, Part: &big}})
			}
		}
	}
	run := replayOpenCode(t, evs...)
	if len(run.answers) != 1 || strings.Join(run.ends, " ") != "prompt.completed" {
		t.Fatalf("%d messages, prompts ended %v; want one message and its prompt completed", len(run.answers), run.ends)
	}
	m := run.answers[0]
	left := 0
	for _, p := range m.Parts {
		if strings.HasPrefix(p.CallID, "toolu_big") {
			if p.Status != parley.ToolCompleted {
				t.Errorf("call %s is %s, want completed", p.CallID, p.Status)
			}
			if p.Result == nil {
				left++
			}
		}
	}
	if left == 0 || m.Status != parley.StatusComplete || !strings.HasSuffix(m.Content, "missing.go does not exist.") {
		t.Fatalf("%d outputs left out, status %s, content %q: want some left out and the whole answer", left, m.Status, m.Content)
	}
}

// TestOpenCodePromptedWithoutAnID: an adapter told only Prompted (no
// message id) takes the first user message it has not seen before: the
// first prompt's message, which OpenCode sends again before recording the
// second prompt's, is not taken for the second's, whose answer is kept.
func TestOpenCodePromptedWithoutAnID(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "opencode")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := &client.OpenCodeAdapter{Runner: r, SessionID: openCodeSession}
	for _, name := range []string{"opencode_resent_1.sse", "opencode_resent_2.sse"} {
		if _, err := c.Ask(ctx, id, "human", "the question", ""); err != nil {
			t.Fatal(err)
		}
		if p, err := r.Next(ctx); err != nil || p.Type != "prompt" {
			t.Fatalf("runner got %+v, %v; want the prompt", p, err)
		}
		a.Prompted()
		evs, _ := recordedOpenCode(t, name)
		for _, ev := range evs {
			if err := a.Handle(ctx, ev); err != nil {
				t.Fatalf("handling %s: %v", ev.Type, err)
			}
		}
	}
	checkRun(t, conversationRun(ctx, t, c, id), "prompt.completed prompt.completed",
		"complete | text=You said: What does go.mod declare? | finish(end_turn)",
		"complete | text=You said: And which Go version? | finish(end_turn)")
}
