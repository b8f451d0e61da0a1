package api_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/retention"
)

// runInput is a RunAgentInput as @ag-ui/client's HttpAgent posts it.
func runInput(thread, run, text string, props map[string]any) map[string]any {
	return map[string]any{"threadId": thread, "runId": run, "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"forwardedProps": props, "protocolVersion": "1.0.0",
		"messages": []any{map[string]any{"id": "m-" + run, "role": "user", "content": text}}}
}

// wantAGUI is the AG-UI run of the scripted answer r1.
const wantAGUI = `RUN_STARTED threadId="t-1" runId="run-1"
TEXT_MESSAGE_START messageId="r1"
TEXT_MESSAGE_CONTENT messageId="r1" delta="Let me "
TEXT_MESSAGE_CONTENT messageId="r1" delta="look."
TEXT_MESSAGE_END messageId="r1"
TOOL_CALL_START toolCallId="c1" toolCallName="search" parentMessageId="r1"
TOOL_CALL_ARGS delta="{\"q\":\"6x7\"}" toolCallId="c1"
TOOL_CALL_END toolCallId="c1"
TOOL_CALL_RESULT messageId="r1:c1" toolCallId="c1" content="{\"hits\":1}"
TEXT_MESSAGE_START messageId="r1"
TEXT_MESSAGE_CONTENT messageId="r1" delta="It is 42."
TEXT_MESSAGE_END messageId="r1"
RUN_FINISHED threadId="t-1" runId="run-1"`

func aguiTypes(evs []chatEvent) string {
	return chunkTypes(evs, "threadId", "runId", "messageId", "delta", "toolCallId", "toolCallName", "parentMessageId", "content", "message")
}

// TestAGUIRunAndResume: a RunAgentInput queues its last user message as a
// prompt with the run's id, in a thread made on first use, and the answer
// comes back as AG-UI events, each with an SSE id; posting the run again
// with any of those ids as Last-Event-ID gives exactly the events after
// it (several events made of one log event included), and without one
// replays the run without asking again.
func TestAGUIRunAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	in := runInput("t-1", "run-1", "What is 6 x 7?", map[string]any{"to": "bob"})
	st := events(t, b.postJSON("/v1/ag-ui", b.alice, in))
	run := b.runnerConn("t-1", b.bob)
	if p := until(t, b, run, "prompt"); p["messageId"] != "run-1" || p["content"] != "What is 6 x 7?" {
		t.Fatalf("prompt = %v", p)
	}
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	full := st.all()
	if got := aguiTypes(full); got != wantAGUI {
		t.Fatalf("run:\n%s\nwant:\n%s", got, wantAGUI)
	}
	var ids []string
	for _, ev := range full {
		if ev.id == "" || slices.Contains(ids, ev.id) {
			t.Fatalf("event %q has id %q (ids so far %v)", ev.data, ev.id, ids)
		}
		ids = append(ids, ev.id)
	}
	if !slices.ContainsFunc(ids, func(id string) bool { return strings.Count(id, ":") == 2 }) {
		t.Fatalf("no log event made several AG-UI events: %v", ids)
	}
	for i, id := range ids {
		rest := events(t, b.postJSON("/v1/ag-ui", b.alice, in, "Last-Event-ID", id)).all()
		if got, want := aguiTypes(append(slices.Clone(full[:i+1]), rest...)), wantAGUI; got != want {
			t.Fatalf("resumed after %s:\n%s", id, aguiTypes(rest))
		}
	}
	if got := aguiTypes(events(t, b.postJSON("/v1/ag-ui", b.alice, in)).all()); got != wantAGUI {
		t.Fatalf("the run posted again:\n%s", got)
	}
	if r := b.do("GET", "/v1/conversations/t-1/messages", b.alice, nil); len(r.body["messages"].([]any)) != 2 {
		t.Fatalf("posting the run again asked again: %s", r.raw)
	}
}

// TestAGUIEndings: a stopped answer finishes its run with outcome
// cancelled, a failed one is RUN_ERROR with its text.
func TestAGUIEndings(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	st := events(t, b.postJSON("/v1/ag-ui", b.alice, runInput("t-2", "run-1", "Stop me", map[string]any{"to": "bob"})))
	run := b.runnerConn("t-2", b.bob)
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, 2)
	// A stop names the run it means: the runId is its prompt's id.
	b.want(b.do("POST", "/v1/conversations/t-2/abort", b.alice, map[string]any{"promptId": "run-2"}), 409, "not_answering")
	r := b.do("POST", "/v1/conversations/t-2/abort", b.alice, map[string]any{"promptId": "run-1"})
	if b.want(r, 202, ""); r.body["promptId"] != "run-1" || r.body["messageId"] != "r1" {
		t.Fatalf("the stop of run-1: %s", r.raw)
	}
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted"}`)
	evs := st.all()
	if got := chunkTypes(evs, "outcome"); !strings.HasSuffix(got, "TEXT_MESSAGE_END\nRUN_FINISHED outcome={\"type\":\"cancelled\"}") {
		t.Fatalf("stopped run:\n%s", got)
	}
	st = events(t, b.postJSON("/v1/ag-ui", b.alice, runInput("t-2", "run-2", "Fail", nil)))
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r2"}`)
	do(t, b, run, `{"type":"error","turnId":"r2","error":"the model is down"}`)
	do(t, b, run, `{"type":"complete"}`) // no retry
	if got := chunkTypes(st.all(), "message"); got != "RUN_STARTED\nRUN_ERROR message=\"the model is down\"" {
		t.Fatalf("failed run:\n%s", got)
	}
}

// TestAGUIResumeAfterCompaction: once retention compacted the run's text
// deltas, a client resuming from a position at or after them gets the
// events after it as before, and one resuming from before them (whose
// place among the events of the deltas is lost) gets the run whole again,
// as for a history replaced: never part of the text twice.
func TestAGUIResumeAfterCompaction(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	in := runInput("t-1", "run-1", "What is 6 x 7?", map[string]any{"to": "bob"})
	st := events(t, b.postJSON("/v1/ag-ui", b.alice, in))
	run := b.runnerConn("t-1", b.bob)
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	full := st.all()
	sw := retention.New(b.db, retention.Options{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if n, err := sw.Pass(b.ctx); err != nil || n.Events == 0 {
		t.Fatalf("compaction: %+v, err %v", n, err)
	}
	whole, exact := 0, 0
	for i, ev := range full {
		rest := events(t, b.postJSON("/v1/ag-ui", b.alice, in, "Last-Event-ID", ev.id)).all()
		got := aguiTypes(append(slices.Clone(full[:i+1]), rest...))
		if len(rest) > 0 && strings.HasPrefix(aguiTypes(rest[:1]), "RUN_STARTED") {
			got = aguiTypes(rest)
			whole++
		} else {
			exact++
		}
		if joinDeltas(got) != joinDeltas(wantAGUI) {
			t.Fatalf("resumed after %s:\n%s", ev.id, aguiTypes(rest))
		}
	}
	if whole == 0 || exact == 0 {
		t.Fatalf("%d resumes sent the run whole, %d went on exactly; want some of each", whole, exact)
	}
}

// joinDeltas joins consecutive TEXT_MESSAGE_CONTENT events into one: the
// text a client shows, whichever deltas brought it.
func joinDeltas(events string) string {
	const content = `TEXT_MESSAGE_CONTENT messageId="r1" delta="`
	var out []string
	for _, line := range strings.Split(events, "\n") {
		if n := len(out); n > 0 && strings.HasPrefix(line, content) && strings.HasPrefix(out[n-1], content) {
			out[n-1] = strings.TrimSuffix(out[n-1], `"`) + strings.TrimPrefix(line, content)
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
