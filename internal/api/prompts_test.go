package api_test

import (
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// until reads runner frames until one of type typ arrives; frames of other
// types that the test may want later (prompts, aborts, reverts) are kept.
func until(t *testing.T, b *bundle, c *websocket.Conn, typ string) map[string]any {
	t.Helper()
	stashMu.Lock()
	kept := stash[c]
	for i, f := range kept {
		if f["type"] == typ {
			stash[c] = append(kept[:i:i], kept[i+1:]...)
			stashMu.Unlock()
			return f
		}
	}
	stashMu.Unlock()
	for {
		f := readFrame(t, b.ctx, c)
		switch {
		case f["type"] == typ:
			return f
		case f["type"] == "error":
			t.Fatalf("runner got an error while waiting for %s: %v", typ, f)
		case f["type"] != "ack":
			stashMu.Lock()
			stash[c] = append(stash[c], f)
			stashMu.Unlock()
		}
	}
}

var (
	stashMu sync.Mutex
	stash   = map[*websocket.Conn][]map[string]any{}
)

// do writes one frame and waits for its ack.
func do(t *testing.T, b *bundle, c *websocket.Conn, frame string) {
	t.Helper()
	if err := c.Write(b.ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	until(t, b, c, "ack")
}

// answer streams one response to the prompt the runner was given.
func answer(t *testing.T, b *bundle, c *websocket.Conn, id, text string) {
	t.Helper()
	do(t, b, c, `{"type":"message.create","turnId":"`+id+`"}`)
	do(t, b, c, `{"type":"message.part.text-delta","turnId":"`+id+`","delta":"`+text+`"}`)
	do(t, b, c, `{"type":"message.finalize","turnId":"`+id+`","reason":"end_turn"}`)
	do(t, b, c, `{"type":"complete"}`)
}

func TestQueuedPromptsGiveSeparateMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "first question"}), 201, "")
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p2", "content": "second question"}), 201, "")
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "content": "not now", "mode": "reject"}), 409, "busy")

	p := until(t, b, run, "prompt")
	if p["messageId"] != "p1" || p["content"] != "first question" {
		t.Fatalf("first prompt frame = %v", p)
	}
	answer(t, b, run, "r1", "one")
	p = until(t, b, run, "prompt")
	if p["messageId"] != "p2" {
		t.Fatalf("second prompt frame = %v", p)
	}
	answer(t, b, run, "r2", "two")

	r := b.do("GET", base+"/messages", b.viewer, nil)
	var got []string
	for _, m := range r.body["messages"].([]any) {
		mm := m.(map[string]any)
		got = append(got, mm["id"].(string)+":"+mm["role"].(string)+":"+mm["content"].(string))
		if mm["role"] == "assistant" {
			want := map[string]string{"r1": "p1", "r2": "p2"}[mm["id"].(string)]
			if mm["replyTo"] != want || mm["turnId"] != want {
				t.Fatalf("%s replies to %v in exchange %v, want %s", mm["id"], mm["replyTo"], mm["turnId"], want)
			}
		}
	}
	if len(got) != 4 || got[0] != "p1:user:first question" || got[1] != "r1:assistant:one" || got[2] != "p2:user:second question" || got[3] != "r2:assistant:two" {
		t.Fatalf("messages = %v", got)
	}
}

func TestRunnerDisconnectRequeuesAndAbortReachesIt(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	b.want(b.do("POST", base+"/abort", b.alice, nil), 404, "not_found")
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "q"}), 201, "")
	until(t, b, run, "prompt")
	run.CloseNow() // the runner dies before answering

	again := b.runnerConn(id, b.alice)
	if p := until(t, b, again, "prompt"); p["messageId"] != "p1" {
		t.Fatalf("after reconnecting, prompt = %v", p)
	}
	r := b.do("GET", base+"/messages?turnId=p1", b.viewer, nil)
	if n := len(r.body["messages"].([]any)); n != 1 {
		t.Fatalf("the prompt's user message was written %d times", n)
	}
	do(t, b, again, `{"type":"message.create","turnId":"r1"}`)
	b.want(b.do("POST", base+"/abort", b.admin, nil), 202, "")
	if f := until(t, b, again, "abort"); f["messageId"] != "p1" {
		t.Fatalf("abort frame = %v", f)
	}
	do(t, b, again, `{"type":"aborted"}`)
	do(t, b, again, `{"type":"complete"}`)
	r = b.do("GET", base+"/messages/r1", b.viewer, nil)
	if r.body["status"] != "canceled" {
		t.Fatalf("aborted response = %s", r.raw)
	}
	r = b.do("GET", base+"/prompts", b.viewer, nil)
	b.want(r, 200, "")
	if q := r.body["prompts"].([]any); len(q) != 0 {
		t.Fatalf("queue after complete = %v", q)
	}
	b.want(b.do("DELETE", base+"/prompts/nope", b.admin, map[string]any{"agentId": "human"}), 404, "not_found")
}
