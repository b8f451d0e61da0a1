package api_test

import (
	"fmt"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

func TestTurnConflictCarriesTheHead(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	path := "/v1/conversations/" + id + "/messages"
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "thinking", "precondition": map[string]any{"expectTurn": 1, "startingTurn": true}}), 201, "")
	r := b.do("POST", path, b.bob, map[string]any{"content": "me too"})
	b.want(r, 409, "turn_conflict")
	head := r.body["error"].(map[string]any)["head"].(map[string]any)
	if head["openTurn"].(map[string]any)["owner"] != "alice" || head["lastSeq"] != 2.0 {
		t.Fatalf("409 head = %v", head)
	}
	r = b.do("POST", path, b.bob, map[string]any{"content": "x", "precondition": map[string]any{"expectTurn": 2, "startingTurn": true}})
	b.want(r, 409, "precondition_failed")
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "done", "finality": "turn", "precondition": map[string]any{"expectTurn": 1, "startingTurn": false}}), 201, "")
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "late", "precondition": map[string]any{"expectTurn": 1, "startingTurn": false}}), 409, "precondition_failed")
	r = b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	if g := r.body["guidance"].(map[string]any); g["nextAgentId"] != "bob" || g["turn"] != 2.0 {
		t.Fatalf("guidance after alice closed = %v", g)
	}
	b.want(b.do("POST", path, b.bob, map[string]any{"content": "bye", "finality": "conversation"}), 201, "")
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "hello?"}), 409, "conversation_closed")
	r = b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	if r.body["guidance"] != nil || r.body["head"].(map[string]any)["closed"] != true {
		t.Fatalf("closed conversation: %s", r.raw)
	}
}

func TestClaimResetAbortDelegate(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	base := "/v1/conversations/" + id
	r := b.do("POST", base+"/turns/claim", b.bob, map[string]any{"expectTurn": 1, "ttlMs": 60000})
	b.want(r, 200, "")
	if r.body["claimed"] != true || r.body["turn"] != 1.0 || r.body["guidance"].(map[string]any)["nextAgentId"] != "bob" {
		t.Fatalf("claim = %s", r.raw)
	}
	b.want(b.do("POST", base+"/turns/claim", b.alice, map[string]any{}), 409, "claim_conflict")
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"content": "x"}), 409, "claim_conflict")
	b.want(b.do("POST", base+"/turns/claim", b.bob, map[string]any{"expectTurn": 1}), 200, "")
	b.want(b.do("POST", base+"/turns/claim", b.bob, map[string]any{"ttlMs": -1}), 422, "invalid_value")
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "working"}), 201, "")

	r = b.do("POST", base+"/turns/reset", b.bob, map[string]any{})
	b.want(r, 200, "")
	if r.body["wasReset"] != true || r.body["turn"] != 1.0 || r.body["written"] != true {
		t.Fatalf("reset = %s", r.raw)
	}
	r = b.do("POST", base+"/turns/reset", b.bob, map[string]any{})
	if r.body["written"] != false || r.body["turn"] != 1.0 {
		t.Fatalf("second reset wrote: %s", r.raw)
	}
	r = b.do("POST", base+"/turns/reset", b.alice, map[string]any{})
	if r.body["wasReset"] != false || r.body["turn"] != 2.0 || r.body["written"] != false {
		t.Fatalf("reset by non-owner = %s", r.raw)
	}
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "again", "precondition": map[string]any{"expectTurn": 1, "startingTurn": true}}), 201, "")

	r = b.do("POST", base+"/delegations", b.bob, map[string]any{"to": "worker"})
	b.want(r, 200, "")
	r = b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "worker", "content": "sub-result"})
	b.want(r, 201, "")
	if m := r.body["message"].(map[string]any); m["turn"] != 1.0 {
		t.Fatalf("delegate wrote into turn %v", m["turn"])
	}
	b.want(b.do("POST", base+"/delegations", b.alice, map[string]any{"to": "x"}), 409, "turn_conflict")
	b.want(b.do("POST", base+"/delegations", b.bob, map[string]any{"to": "bad id"}), 422, "invalid_value")

	b.want(b.do("POST", base+"/turns/abort", b.alice, map[string]any{}), 409, "turn_conflict")
	r = b.do("POST", base+"/turns/abort", b.bob, map[string]any{"reason": "giving up"})
	b.want(r, 200, "")
	if g := r.body["guidance"].(map[string]any); g["nextAgentId"] != "alice" || g["turn"] != 2.0 {
		t.Fatalf("guidance after abort = %v", g)
	}
	seq := r.body["seq"]
	r = b.do("POST", base+"/turns/abort", b.bob, map[string]any{})
	if r.status != 200 || r.body["written"] != false || r.body["seq"] != seq {
		t.Fatalf("repeated abort = %s", r.raw)
	}
	b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "worker", "content": "too late"}), 201, "") // opens turn 2 as itself
	r = b.do("GET", base+"/events?after=0", b.viewer, nil)
	var types []string
	for _, e := range r.body["events"].([]any) {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	want := "[conversation.created turn.claimed turn.claimed message turn.reset message delegation message turn.aborted message]"
	if fmt.Sprint(types) != want {
		t.Fatalf("log = %v\nwant  %s", types, want)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	path := "/v1/conversations/" + id + "/messages"
	body := map[string]any{"content": "once", "finality": "turn"}
	first := b.do("POST", path, b.alice, body, "Idempotency-Key", "req-1")
	b.want(first, 201, "")
	again := b.do("POST", path, b.alice, `{ "finality": "turn",  "content": "once" }`, "Idempotency-Key", "req-1")
	b.want(again, 201, "")
	if again.header.Get("Idempotent-Replayed") != "true" || string(again.raw) != string(first.raw) {
		t.Fatalf("replay differs:\n%s\n%s", first.raw, again.raw)
	}
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "other"}, "Idempotency-Key", "req-1"), 422, "idempotency_mismatch")
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "x", "clientRequestId": "a"}, "Idempotency-Key", "b"), 400, "invalid_request")
	// The same key from another agent is another request.
	b.want(b.do("POST", path, b.bob, body, "Idempotency-Key", "req-1"), 201, "")
	if b.lastSeq(id) != 3 {
		t.Fatalf("lastSeq %v, want 3", b.lastSeq(id))
	}
}

func TestReadsPageAndThread(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "human", "id": "q", "role": "user", "content": "question", "finality": "turn"}), 201, "")
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": "a1", "replyTo": "q", "content": "from alice", "finality": "turn"}), 201, "")
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"id": "b1", "replyTo": "q", "content": "from bob", "finality": "turn"}), 201, "")
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": "a2", "replyTo": "b1", "content": "to bob", "finality": "turn"}), 201, "")
	b.want(b.do("POST", base+"/events", b.alice, map[string]any{"type": "trace", "payload": map[string]any{"thought": "hm"}}), 201, "")
	b.want(b.do("POST", base+"/events", b.alice, map[string]any{"type": "trace", "finality": "turn"}), 400, "invalid_request")
	b.want(b.do("POST", base+"/events", b.alice, map[string]any{"type": "message"}), 422, "invalid_value")

	r := b.do("GET", base+"/messages?limit=2", b.viewer, nil)
	if ms := r.body["messages"].([]any); len(ms) != 2 || r.body["nextAfter"] != 3.0 {
		t.Fatalf("first page = %s", r.raw)
	}
	r = b.do("GET", base+"/messages?after=3&limit=2", b.viewer, nil)
	if ms := r.body["messages"].([]any); len(ms) != 2 || ms[0].(map[string]any)["id"] != "b1" {
		t.Fatalf("second page = %s", r.raw)
	}
	r = b.do("GET", base+"/messages?turnId=q&agentId=alice", b.viewer, nil)
	if ms := r.body["messages"].([]any); len(ms) != 2 || r.body["nextAfter"] != nil {
		t.Fatalf("alice's messages of turnId q = %s", r.raw)
	}
	r = b.do("GET", base+"/messages/q/replies", b.viewer, nil)
	if ms := r.body["messages"].([]any); len(ms) != 2 {
		t.Fatalf("replies = %s", r.raw)
	}
	r = b.do("GET", base+"/messages/a2/thread", b.viewer, nil)
	b.want(r, 200, "")
	if r.body["root"].(map[string]any)["id"] != "q" || len(r.body["ancestors"].([]any)) != 2 || r.body["message"].(map[string]any)["depth"] != 2.0 {
		t.Fatalf("thread of a2 = %s", r.raw)
	}
	r = b.do("GET", base+"/messages/q/thread", b.viewer, nil)
	if len(r.body["descendants"].([]any)) != 3 || len(r.body["ancestors"].([]any)) != 0 {
		t.Fatalf("thread of q = %s", r.raw)
	}
	b.want(b.do("GET", base+"/messages/nope", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", base+"/messages/nope/thread", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", base+"/messages/nope/replies", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/nope/messages", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/nope/events", b.viewer, nil), 404, "not_found")
	r = b.do("GET", base+"/events?after=4&limit=2", b.viewer, nil)
	if es := r.body["events"].([]any); len(es) != 2 || es[0].(map[string]any)["seq"] != 5.0 {
		t.Fatalf("events page = %s", r.raw)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("GET", "/healthz", "", nil), 200, "")
	b.want(b.do("GET", "/readyz", "", nil), 200, "")
	r := b.do("GET", "/metrics", "", nil)
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
}

// TestDelegatesPerTurnAreBounded: delegations into one turn past
// -max-delegates are 409 busy and write nothing, so that a turn's
// delegates (in the view, and in the head every 409 carries) stay few:
// 8,000 of them once took 56 s to write and made each refusal 1 MB.
func TestDelegatesPerTurnAreBounded(t *testing.T) {
	t.Parallel()
	limits := conv.DefaultLimits
	limits.MaxDelegates = 3
	b := setup(t, engine.Options{Limits: limits}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"content": "working"}), 201, "")
	for i := range 3 {
		b.want(b.do("POST", base+"/delegations", b.alice, map[string]any{"to": fmt.Sprintf("w%d", i)}), 200, "")
	}
	before := b.snapshot()
	r := b.do("POST", base+"/delegations", b.alice, map[string]any{"to": "w3"})
	b.want(r, 409, "busy")
	if e := r.body["error"].(map[string]any); e["maxDelegates"] != 3.0 || e["head"] == nil {
		t.Fatalf("the refusal says %s", r.raw)
	}
	if b.snapshot() != before {
		t.Fatal("a refused delegation wrote something")
	}
}
