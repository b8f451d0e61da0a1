package api_test

import (
	"strconv"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

func TestRevertRemovesTheMessageAndAllAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": m, "content": m, "finality": "turn"}), 201, "")
	}
	run := b.runnerConn(id, b.alice)
	before := b.lastSeq(id)
	// An id no message of the conversation ever had is 404, to an admin
	// and to a member; nothing is written.
	b.want(b.do("POST", base+"/revert", b.admin, map[string]any{"agentId": "human", "messageId": "nope"}), 404, "not_found")
	b.want(b.do("POST", base+"/revert", b.alice, map[string]any{"messageId": "nope"}), 404, "not_found")
	if b.lastSeq(id) != before {
		t.Fatal("reverting an unknown id wrote something")
	}
	if e := send(t, b, run, `{"type":"reverted","messageIds":["nope","nada"]}`); e["type"] != "error" || e["error"].(map[string]any)["code"] != "not_found" {
		t.Fatalf("a runner's revert of unknown ids: %v", e)
	}
	r := b.do("POST", base+"/revert", b.admin, map[string]any{"agentId": "human", "messageId": "m2"})
	b.want(r, 200, "")
	if got := r.body["removed"].([]any); len(got) != 3 || got[0] != "m2" || got[2] != "m4" {
		t.Fatalf("removed = %v", got)
	}
	if f := until(t, b, run, "revert"); f["messageId"] != "m2" {
		t.Fatalf("runner got %v", f)
	}
	r = b.do("GET", base+"/messages", b.viewer, nil)
	if ms := r.body["messages"].([]any); len(ms) != 1 || ms[0].(map[string]any)["id"] != "m1" {
		t.Fatalf("messages after revert = %s", r.raw)
	}
	r = b.do("GET", base+"/events?after="+itoa(int(before)), b.viewer, nil)
	ev := r.body["events"].([]any)[0].(map[string]any)
	if ev["type"] != "messages.removed" || len(ev["data"].(map[string]any)["messageIds"].([]any)) != 3 {
		t.Fatalf("revert event = %v", ev)
	}
	// Again: the message is gone, not unknown; the repeat writes nothing.
	again := b.lastSeq(id)
	r = b.do("POST", base+"/revert", b.admin, map[string]any{"agentId": "human", "messageId": "m2"})
	b.want(r, 200, "")
	if len(r.body["removed"].([]any)) != 0 || b.lastSeq(id) != again {
		t.Fatalf("a repeated revert did something: %s", r.raw)
	}
	// A runner's own revert (of its agent's message) does the same and is
	// not sent back to it.
	if ack := send(t, b, run, `{"type":"reverted","messageIds":["m1"]}`); ack["type"] != "ack" {
		t.Fatalf("reverted: %v", ack)
	}
	r = b.do("GET", base+"/messages", b.viewer, nil)
	if ms := r.body["messages"].([]any); len(ms) != 0 {
		t.Fatalf("messages after the runner's revert = %s", r.raw)
	}
	b.want(b.do("POST", base+"/revert", b.viewer, map[string]any{"messageId": "m1"}), 403, "forbidden")
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRevertIsBounded: a revert that would remove more messages than the
// bound is 413 and removes nothing (its event would name them all).
func TestRevertIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{MaxRevert: 3}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": m, "content": m, "finality": "turn"}), 201, "")
	}
	before := b.log(id)
	b.want(b.do("POST", base+"/revert", b.admin, map[string]any{"agentId": "ops", "messageId": "m1"}), 413, "too_large")
	if b.log(id) != before {
		t.Fatal("a refused revert wrote something")
	}
	b.want(b.do("POST", base+"/revert", b.admin, map[string]any{"agentId": "ops", "messageId": "m2"}), 200, "")
}

// TestOutsidersLearnNothingFromReverts: an outsider's revert is refused
// before anything is read, with the same answer whether the message exists
// or not (before, 413 "would remove more than …" said that it did).
func TestOutsidersLearnNothingFromReverts(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{MaxRevert: 3}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"id": m, "content": m, "finality": "turn"}), 201, "")
	}
	outsider := b.agentToken("mallory")
	before := b.snapshot()
	exists := b.do("POST", base+"/revert", outsider, map[string]any{"messageId": "m1"})
	missing := b.do("POST", base+"/revert", outsider, map[string]any{"messageId": "nope"})
	b.want(exists, 403, "forbidden")
	b.want(missing, 403, "forbidden")
	if string(exists.raw) != string(missing.raw) {
		t.Fatalf("an outsider tells an existing message from a missing one:\n%s\n%s", exists.raw, missing.raw)
	}
	if b.snapshot() != before {
		t.Fatal("a refused revert wrote something")
	}
}
