package api_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
)

// wantPrompt checks a prompt status's state, and returns its body.
func wantPrompt(t *testing.T, b *bundle, r response, state string) map[string]any {
	t.Helper()
	b.want(r, 200, "")
	if r.body["state"] != state {
		t.Fatalf("prompt status = %s, want state %s", r.raw, state)
	}
	return r.body
}

// TestPromptStatusSaysWhatAPromptWaitsOnAndHowItEnded: a prompt's status
// says it waits for a runner while none is attached, who answers it once
// dispatched, and how it ended, to anyone who may read the conversation;
// a wait holds the request until the prompt ends.
func TestPromptStatusSaysWhatAPromptWaitsOnAndHowItEnded(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	b.want(b.do("GET", base+"/prompts/nope", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/nope/prompts/p1", b.viewer, nil), 404, "not_found")
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "first"}), 201, "")
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p2", "content": "second"}), 201, "")
	for _, bad := range []string{"61s", "-1s", "abc", "1h", "99999"} {
		b.want(b.do("GET", base+"/prompts/p1?wait="+bad, b.viewer, nil), 422, "invalid_value")
	}
	b.want(b.do("GET", base+"/prompts/p1?wait=1s&wait=2s", b.viewer, nil), 422, "invalid_value")

	st := wantPrompt(t, b, b.do("GET", base+"/prompts/p1", b.viewer, nil), "queued")
	if w, _ := st["waitingOn"].(map[string]any); w["reason"] != "runner" || st["position"] != 0.0 || st["agentId"] != "human" {
		t.Fatalf("with no runner, p1's status = %v, want it waiting on a runner, first in line", st)
	}
	// A wait that passes answers with the status as it is then.
	wantPrompt(t, b, b.do("GET", base+"/prompts/p2?wait=1", b.viewer, nil), "queued")

	// A waiter for p1, which ends once it is answered.
	waited := make(chan response, 1)
	go func() { waited <- b.do("GET", base+"/prompts/p1?wait=60s", b.alice, nil) }()

	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	st = wantPrompt(t, b, b.do("GET", base+"/prompts/p1", b.viewer, nil), "dispatched")
	if st["runner"] != "alice" {
		t.Fatalf("dispatched p1's status = %v, want runner alice", st)
	}
	st = wantPrompt(t, b, b.do("GET", base+"/prompts/p2", b.viewer, nil), "queued")
	if w, _ := st["waitingOn"].(map[string]any); w["reason"] != "prompt" || w["promptId"] != "p1" || st["position"] != 1.0 {
		t.Fatalf("p2 behind p1: status = %v, want it waiting on p1", st)
	}
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	st = wantPrompt(t, b, b.do("GET", base+"/prompts/p1", b.viewer, nil), "answering")
	if st["messageId"] != "r1" {
		t.Fatalf("p1 being answered: status = %v, want messageId r1", st)
	}
	select {
	case r := <-waited:
		t.Fatalf("the wait ended before the prompt did: %s", r.raw)
	default:
	}
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"one"}`)
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	do(t, b, run, `{"type":"complete"}`)
	var r response
	select {
	case r = <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end when the prompt did")
	}
	st = wantPrompt(t, b, r, "completed")
	if st["messageId"] != "r1" || st["runner"] != "alice" || st["endedSeq"] == nil {
		t.Fatalf("p1 answered: status = %v, want runner alice, messageId r1", st)
	}

	// A prompt taken back ends canceled, and says why; an ended prompt's
	// wait answers at once.
	until(t, b, run, "prompt") // p2
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p3", "content": "third"}), 201, "")
	b.want(b.do("DELETE", base+"/prompts/p3", b.admin, map[string]any{"agentId": "human"}), 200, "")
	st = wantPrompt(t, b, b.do("GET", base+"/prompts/p3?wait=60s", b.viewer, nil), "canceled")
	if st["reason"] != "withdrawn" || st["runner"] != nil {
		t.Fatalf("withdrawn p3: status = %v", st)
	}
}

// TestPromptWaitHearsOtherNodes: a wait on one server ends when the
// prompt is answered through another server of the same store.
func TestPromptWaitHearsOtherNodes(t *testing.T) {
	t.Parallel()
	b, _ := setupServer(t, engine.Options{Shared: true}, api.Options{})
	srv, here, _ := serveStore(t, unclosed{b.db}, engine.Options{Shared: true}, runners.Options{}, api.Options{})
	node := *b
	node.url = srv.URL
	id := b.conversation()
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "first"}), 201, "")
	until(t, b, run, "prompt")
	waited := make(chan response, 1)
	go func() { waited <- node.do("GET", base+"/prompts/p1?wait=60s", b.viewer, nil) }()
	// The waiter is following once the other server holds the
	// conversation's feed; then the answer is written elsewhere.
	deadline := time.Now().Add(30 * time.Second)
	for !here.Following(id) {
		if time.Now().After(deadline) {
			t.Fatal("the wait never followed the conversation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	answer(t, b, run, "r1", "one")
	here.CatchUp(id, int64(b.lastSeq(id)))
	select {
	case r := <-waited:
		wantPrompt(t, b, r, "completed")
	case <-time.After(30 * time.Second):
		t.Fatal("the wait on the other server did not end when the prompt did")
	}
}

// TestPromptWaitsCountAsConnections: a waiting request counts as one of
// its token's connections; past the bound a wait is 429 before it waits,
// while an answer at once (no wait) is still served.
func TestPromptWaitsCountAsConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 1}})
	id := b.conversation()
	base := "/v1/conversations/" + id
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "first"}), 201, "")
	waited := make(chan response, 1)
	go func() { waited <- b.do("GET", base+"/prompts/p1?wait=60s", b.viewer, nil) }()
	deadline := time.Now().Add(30 * time.Second)
	for !b.eng.Following(id) {
		if time.Now().After(deadline) {
			t.Fatal("the wait never followed the conversation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.want(b.do("GET", base+"/prompts/p1?wait=60s", b.viewer, nil), 429, "rate_limited")
	wantPrompt(t, b, b.do("GET", base+"/prompts/p1", b.viewer, nil), "queued")
	b.want(b.do("DELETE", base+"/prompts/p1", b.admin, map[string]any{"agentId": "human"}), 200, "")
	select {
	case r := <-waited:
		wantPrompt(t, b, r, "canceled")
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end when the prompt was withdrawn")
	}
}

// TestPromptStatusNamesTheTurnItWaitsFor: a prompt a runner could take
// waits while another agent holds the floor, and its status names that
// agent's open turn; once the turn closes, it is dispatched.
func TestPromptStatusNamesTheTurnItWaitsFor(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	base := "/v1/conversations/" + id
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "still thinking", "finality": "none"}), 201, "")
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "first", "to": "alice"}), 201, "")
	st := wantPrompt(t, b, b.do("GET", base+"/prompts/p1", b.viewer, nil), "queued")
	if w, _ := st["waitingOn"].(map[string]any); w["reason"] != "turn" || w["agentId"] != "bob" {
		t.Fatalf("behind bob's open turn: status = %v, want it waiting on bob's turn", st)
	}
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "done", "finality": "turn"}), 201, "")
	until(t, b, run, "prompt")
	wantPrompt(t, b, b.do("GET", base+"/prompts/p1", b.viewer, nil), "dispatched")
}
