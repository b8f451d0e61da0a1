package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// leaseConversation makes a conversation with alice as participant, bob as
// member, and a turn lease of ms milliseconds.
func leaseConversation(b *bundle, ms int) string {
	b.t.Helper()
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"alice"}, "members": []string{"bob"}, "turnLeaseMs": ms})
	b.want(r, 201, "")
	c := r.body["conversation"].(map[string]any)
	if c["turnLeaseMs"] != float64(ms) {
		b.t.Fatalf("conversation = %v", c)
	}
	return c["id"].(string)
}

// timeouts returns the turn.aborted tombstones of reason timeout in a
// conversation's log, as "turn/agent".
func timeouts(b *bundle, id string) []string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/events?limit=1000", b.viewer, nil)
	b.want(r, 200, "")
	var out []string
	for _, e := range r.body["events"].([]any) {
		ev := e.(map[string]any)
		if ev["type"] != "turn.aborted" {
			continue
		}
		if d := ev["data"].(map[string]any); d["reason"] == "timeout" && ev["finality"] == "turn" {
			out = append(out, strings.Join([]string{jsonNumber(ev["turn"]), ev["agentId"].(string)}, "/"))
		}
	}
	return out
}

func jsonNumber(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestTurnLeaseEndsAnAbandonedTurn: carol writes with finality none and
// is never heard of again (no runner); bob's prompt waits for her turn,
// saying so and until when; once the lease has passed the turn ends with
// a turn.aborted tombstone (reason timeout), guidance moves on, and the
// prompt goes to alice's runner. The tombstone survives an export and an
// import.
func TestTurnLeaseEndsAnAbandonedTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := leaseConversation(b, 1000)
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "carol", "id": "c1", "content": "half a thought"}), 201, "")
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "me too"}), 409, "turn_conflict")
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p1", "content": "a question"}), 201, "")
	if q := promptsOf(b, id); len(q) == 1 {
		w, _ := q[0]["waitingOn"].(map[string]any)
		if w != nil && (w["reason"] != "turn" || w["agentId"] != "carol" || w["until"] == nil) {
			t.Fatalf("the prompt shows %v", q[0])
		}
	}
	if p := until(t, b, run, "prompt"); p["messageId"] != "p1" {
		t.Fatalf("prompt frame = %v", p)
	}
	if got := timeouts(b, id); len(got) != 1 || got[0] != "1/carol" {
		t.Fatalf("timeouts = %v", got)
	}
	answer(t, b, run, "r1", "an answer")
	v := b.do("GET", base, b.viewer, nil)
	if v.body["head"].(map[string]any)["openTurn"] != nil {
		t.Fatalf("head = %v", v.body["head"])
	}

	jsonl := b.do("GET", base+"/export?format=jsonl", b.viewer, nil)
	b.want(jsonl, 200, "")
	b.want(b.do("POST", "/v1/conversations/import?id=copy", b.admin, jsonl.raw), 201, "")
	if got := timeouts(b, "copy"); len(got) != 1 || got[0] != "1/carol" {
		t.Fatalf("timeouts of the imported copy = %v", got)
	}
	js := b.do("GET", base+"/export?format=json", b.viewer, nil)
	b.want(js, 200, "")
	b.want(b.do("POST", "/v1/conversations/import?id=copy2", b.admin, js.raw), 201, "")
	if got := timeouts(b, "copy2"); len(got) != 1 || got[0] != "1/carol" {
		t.Fatalf("timeouts of the JSON copy = %v", got)
	}
}

// TestTurnLeaseSparesAnOwnerWithARunner: an open turn whose owner has a
// runner attached does not lapse however long it is silent; once that
// runner is gone, it lapses within a lease.
func TestTurnLeaseSparesAnOwnerWithARunner(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := leaseConversation(b, 1000)
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": "a1", "content": "working on it"}), 201, "")
	time.Sleep(2500 * time.Millisecond) // two leases and a half
	if got := timeouts(b, id); len(got) != 0 {
		t.Fatalf("a turn whose owner has a runner lapsed: %v", got)
	}
	run.CloseNow()
	deadline := time.Now().Add(20 * time.Second)
	for len(timeouts(b, id)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the turn never lapsed once its owner's runner was gone")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "my turn"}), 201, "")
}

// TestTurnLeaseBadValues: a conversation's turn lease is from one second to
// one day; anything else is refused and creates nothing.
func TestTurnLeaseBadValues(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	for _, ms := range []any{-1, 999, 86_400_001, 1.5, "60000"} {
		r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": "bad", "turnLeaseMs": ms})
		if r.status/100 != 4 {
			t.Fatalf("turnLeaseMs %v: %d %s", ms, r.status, r.raw)
		}
	}
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": "bad", "turnLeaseMs": 999}), 422, "invalid_value")
	b.want(b.do("GET", "/v1/conversations/bad", b.admin, nil), 404, "not_found")
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": "ok", "turnLeaseMs": 86_400_000}), 201, "")
}
