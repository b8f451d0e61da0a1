package api_test

import (
	"fmt"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// TestFullQueueRefusesAndWritesGoOn: through the real server, a
// conversation whose prompt queue is full refuses one more prompt with 409
// busy, saying how long the queue is and writing nothing, while its runner
// still streams its answer into it and another conversation takes writes;
// once the answer ends there is room for one prompt again.
func TestFullQueueRefusesAndWritesGoOn(t *testing.T) {
	t.Parallel()
	const limit = 16
	limits := conv.DefaultLimits
	limits.MaxQueuedPrompts = limit
	b := setup(t, engine.Options{Limits: limits}, api.Options{})
	id, other := b.conversation(), b.conversation("alice", "bob")
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	for i := range limit {
		b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": fmt.Sprint("p", i), "content": fmt.Sprint("question ", i)}), 201, "")
	}
	if p := until(t, b, run, "prompt"); p["messageId"] != "p0" {
		t.Fatalf("first prompt frame = %v", p)
	}
	before := b.log(id)
	for _, mode := range []string{"followup", "steer", "collect"} {
		r := b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "content": "one too many", "mode": mode})
		b.want(r, 409, "busy")
		e := r.body["error"].(map[string]any)
		if e["queueLength"] != float64(limit) || e["maxQueueLength"] != float64(limit) || e["head"] == nil {
			t.Fatalf("mode %s past the limit: %s", mode, r.raw)
		}
	}
	if b.log(id) != before {
		t.Fatal("a refused prompt wrote something")
	}

	// The runner streams its answer into the full conversation, and the
	// other conversation takes writes meanwhile.
	do(t, b, run, `{"type":"message.create","turnId":"r0"}`)
	for i := range 50 {
		do(t, b, run, `{"type":"message.part.text-delta","turnId":"r0","delta":"word `+fmt.Sprint(i)+` "}`)
		if i%10 == 0 {
			b.want(b.do("POST", "/v1/conversations/"+other+"/messages", b.alice, map[string]any{"content": fmt.Sprint("elsewhere ", i)}), 201, "")
		}
	}
	do(t, b, run, `{"type":"message.finalize","turnId":"r0","reason":"end_turn"}`)
	r := b.do("GET", base+"/messages/r0", b.viewer, nil)
	b.want(r, 200, "")
	if r.body["status"] != "complete" || len(r.body["content"].(string)) == 0 {
		t.Fatalf("the answer streamed into the full conversation: %s", r.raw)
	}
	if n := len(b.do("GET", "/v1/conversations/"+other+"/messages", b.viewer, nil).body["messages"].([]any)); n != 5 {
		t.Fatalf("the other conversation holds %d messages, want 5", n)
	}
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "content": "still full"}), 409, "busy")
	do(t, b, run, `{"type":"complete"}`)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "room", "content": "room again"}), 201, "")
	if q := b.do("GET", base+"/prompts", b.viewer, nil).body["prompts"].([]any); len(q) != limit {
		t.Fatalf("the queue holds %d prompts, want %d", len(q), limit)
	}
}
