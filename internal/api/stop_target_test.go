package api_test

import (
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestStopNamesItsTarget: a stop that names its prompt stops that prompt's
// answer only while it is being answered; otherwise it is 409
// not_answering, naming what is being answered now (or nothing), and
// writes nothing. Its 202 says what it stopped. A stop that names nothing
// keeps its meaning: the answer under way.
func TestStopNamesItsTarget(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "first"}), 201, "")
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"done"}`)
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	// p1's text has ended, p1 is still dispatched; p2 waits behind it.
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p2", "content": "second"}), 201, "")

	refused := func(target string, wantPrompt, wantMessage any) {
		t.Helper()
		before := b.snapshot()
		r := b.do("POST", base+"/abort", b.admin, map[string]any{"promptId": target})
		b.want(r, 409, parley.ENOTANSWERING)
		e := r.body["error"].(map[string]any)
		switch ans := e["answering"].(type) {
		case nil:
			if wantPrompt != nil {
				t.Fatalf("stop of %s: answering is null, want %v: %s", target, wantPrompt, r.raw)
			}
		case map[string]any:
			if ans["promptId"] != wantPrompt || ans["messageId"] != wantMessage {
				t.Fatalf("stop of %s: answering %v, want %v in %v: %s", target, ans, wantPrompt, wantMessage, r.raw)
			}
		default:
			t.Fatalf("stop of %s: no answering: %s", target, r.raw)
		}
		if b.snapshot() != before {
			t.Fatalf("a refused stop of %s wrote something", target)
		}
	}
	refused("p2", "p1", nil) // waiting, not answered: p1 is, with no message streaming
	refused("nope", "p1", nil)

	do(t, b, run, `{"type":"complete"}`)
	if f := until(t, b, run, "prompt"); f["messageId"] != "p2" {
		t.Fatalf("second prompt frame = %v", f)
	}
	do(t, b, run, `{"type":"message.create","turnId":"r2"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r2","delta":"going"}`)
	refused("p1", "p2", "r2") // answered already: the stop must not reach p2

	// An agent token names only itself; an admin may name whom it stops as.
	b.want(b.do("POST", base+"/abort", b.alice, map[string]any{"agentId": "bob", "promptId": "p2"}), 403, parley.EFORBIDDEN)
	r := b.do("POST", base+"/abort", b.admin, map[string]any{"agentId": "human", "promptId": "p2"})
	b.want(r, 202, "")
	if r.body["status"] != "aborting" || r.body["promptId"] != "p2" || r.body["messageId"] != "r2" {
		t.Fatalf("the stop's answer: %s", r.raw)
	}
	if f := until(t, b, run, "abort"); f["messageId"] != "p2" {
		t.Fatalf("abort frame = %v", f)
	}
	// Without a body: the answer under way, told again.
	r = b.do("POST", base+"/abort", b.admin, nil)
	if b.want(r, 202, ""); r.body["promptId"] != "p2" || r.body["messageId"] != "r2" {
		t.Fatalf("the untargeted stop's answer: %s", r.raw)
	}
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted","turnId":"r2"}`)
	refused("p2", nil, nil)
	b.want(b.do("POST", base+"/abort", b.admin, nil), 404, parley.ENOTFOUND)

	// Bad input.
	b.want(b.do("POST", base+"/abort", b.admin, map[string]any{"promptId": "a b"}), 422, parley.EINVALIDVALUE)
	b.want(b.do("POST", base+"/abort", b.admin, `{"promptId":5}`), 400, parley.EINVALID)
}
