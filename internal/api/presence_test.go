package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// runnersOf returns the runners a guidance names.
func runnersOf(g any) []string {
	m, _ := g.(map[string]any)
	var out []string
	for _, r := range asSlice(m["runners"]) {
		out = append(out, fmt.Sprint(r))
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// TestPresenceInTheViewAndTheStream: the conversation's view names the
// agents with a runner attached (its own runners and agent-wide ones), and
// a stream gets a new guidance when one connects or leaves, with no event
// written.
func TestPresenceInTheViewAndTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	if r := b.do("GET", base, b.viewer, nil); len(runnersOf(r.body["guidance"])) != 0 {
		t.Fatalf("with no runner, the view says %s", r.raw)
	}
	seq := b.lastSeq(id)
	ws := b.dialAs(id, b.viewer, "/ws")
	if f := readFrame(t, b.ctx, ws); f["type"] != "init" {
		t.Fatalf("first frame %v", f)
	}
	// nextRunners reads frames until a guidance and returns its runners.
	nextRunners := func() []string {
		t.Helper()
		for {
			f := readFrame(t, b.ctx, ws)
			if f["type"] == "guidance" {
				return runnersOf(f["data"])
			}
		}
	}

	run := b.runnerConn(id, b.alice)
	if got := nextRunners(); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("once alice's runner connected, the stream's guidance names %v", got)
	}
	if r := b.do("GET", base, b.viewer, nil); !slices.Equal(runnersOf(r.body["guidance"]), []string{"alice"}) {
		t.Fatalf("with alice's runner, the view says %s", r.raw)
	}
	wide := b.agentRunnerConn("bob", b.bob)
	if got := nextRunners(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("once bob's agent-wide runner connected, the stream's guidance names %v", got)
	}
	run.CloseNow()
	if got := nextRunners(); !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("once alice's runner left, the stream's guidance names %v", got)
	}
	wide.CloseNow()
	if got := nextRunners(); len(got) != 0 {
		t.Fatalf("once every runner left, the stream's guidance names %v", got)
	}
	if b.lastSeq(id) != seq {
		t.Fatalf("presence wrote events: seq %v, then %v", seq, b.lastSeq(id))
	}
}

// TestChatSaysWhenNoRunnerAnswers: a question to an agent with no runner
// attached says so at once in the chat protocols (a transient data part
// of the AI SDK's stream, an AG-UI CUSTOM event), and says it again once a
// runner took it; a question answered at once says nothing of the kind.
func TestChatSaysWhenNoRunnerAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	chat := events(t, b.postJSON("/v1/chat", b.alice, chatBody("chat-p", "u1", "anyone?", "to", "bob")))
	chat.withStatus = true
	agui := events(t, b.postJSON("/v1/ag-ui", b.alice, runInput("chat-p", "run-1", "and you?", map[string]any{"to": "bob"})))
	agui.withStatus = true
	first := func(s *sseData, skip string) string {
		t.Helper()
		for {
			ev, ok := s.next()
			if !ok {
				t.Fatal("the stream ended")
			}
			if !strings.Contains(ev.data, skip) {
				return ev.data
			}
		}
	}
	const waiting = `{"promptId":"u1","state":"queued","waitingOn":{"reason":"runner","agentId":"bob"}}`
	if got := first(chat, "\"start\""); got != `{"data":`+waiting+`,"transient":true,"type":"data-parley-status"}` {
		t.Fatalf("before any runner, the chat stream sent %s, want a status saying it waits for bob's runner", got)
	}
	if got := first(agui, "RUN_STARTED"); !strings.HasPrefix(got, `{"name":"parley.status","type":"CUSTOM","value":{"promptId":"run-1","state":"queued","waitingOn":{"reason":`) {
		t.Fatalf("before any runner, the AG-UI stream sent %s, want a status", got)
	}
	run := b.runnerConn("chat-p", b.bob)
	until(t, b, run, "prompt")
	if got := first(chat, "\"start\""); got != `{"data":{"promptId":"u1","state":"dispatched","runner":"bob"},"transient":true,"type":"data-parley-status"}` {
		t.Fatalf("once bob's runner took it, the chat stream sent %s", got)
	}
	answer(t, b, run, "r1", "yes")
	until(t, b, run, "prompt")
	answer(t, b, run, "r2", "me too")
	if got := chunkTypes(chat.all(), "data"); !strings.HasSuffix(got, "finish\n[DONE]") || strings.Contains(got, "parley-status") {
		t.Fatalf("the chat stream went on with\n%s", got)
	}
	agui.withStatus = false
	if got := aguiTypes(agui.all()); !strings.Contains(got, "RUN_FINISHED") || strings.Contains(got, "parley.status") {
		t.Fatalf("the AG-UI stream went on with\n%s", got)
	}

	// Asked with a runner attached: no status at all.
	again := events(t, b.postJSON("/v1/chat", b.alice, chatBody("chat-p", "u2", "still there?", "to", "bob")))
	until(t, b, run, "prompt")
	answer(t, b, run, "r3", "yes")
	again.all()
	if len(again.statuses) != 0 {
		t.Fatalf("a question answered at once got statuses %v", again.statuses)
	}
}
