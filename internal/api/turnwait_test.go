package api_test

import (
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// promptsOf lists a conversation's prompt queue as the API shows it.
func promptsOf(b *bundle, id string) []map[string]any {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/prompts", b.viewer, nil)
	b.want(r, 200, "")
	var out []map[string]any
	for _, p := range r.body["prompts"].([]any) {
		out = append(out, p.(map[string]any))
	}
	return out
}

// TestPromptOfTheTurnsOwnerIsDispatched: an asker who holds the open turn
// (it posted with the default finality none) and then queues a prompt does
// not wait behind itself: the prompt closes the asker's turn and goes to
// the runner, whose answer replies to it.
func TestPromptOfTheTurnsOwnerIsDispatched(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"id": "hello", "role": "user", "content": "hello"}), 201, "")
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p1", "content": "and a question"}), 201, "")
	if p := until(t, b, run, "prompt"); p["messageId"] != "p1" {
		t.Fatalf("prompt frame = %v", p)
	}
	answer(t, b, run, "r1", "an answer")
	r := b.do("GET", base+"/messages", b.viewer, nil)
	b.want(r, 200, "")
	msgs := r.body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages = %s", r.raw)
	}
	p, a := msgs[1].(map[string]any), msgs[2].(map[string]any)
	if p["id"] != "p1" || p["finality"] != "turn" || a["replyTo"] != "p1" {
		t.Fatalf("the prompt %v and its answer %v", p, a)
	}
	if q := promptsOf(b, id); len(q) != 0 {
		t.Fatalf("queue after the answer = %v", q)
	}
}

// TestWaitingPromptSaysWhatItWaitsFor: a prompt that waits names what it
// waits for: another agent's open turn (its owner, turn and turnId), the
// prompt being answered, or a runner for the agent it is addressed to.
func TestWaitingPromptSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id

	// No runner yet: the prompt waits for one of its addressee.
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p0", "content": "anyone?", "to": "alice"}), 201, "")
	q := promptsOf(b, id)
	if w, _ := q[0]["waitingOn"].(map[string]any); w == nil || w["reason"] != "runner" || w["agentId"] != "alice" {
		t.Fatalf("a prompt with no runner shows %v", q[0])
	}
	b.want(b.do("DELETE", base+"/prompts/p0", b.bob, nil), 200, "")

	// carol holds the floor: the prompt waits for her turn.
	b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "carol", "id": "c1", "content": "thinking aloud"}), 201, "")
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p1", "content": "a question"}), 201, "")
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p2", "content": "another"}), 201, "")
	q = promptsOf(b, id)
	if len(q) != 2 {
		t.Fatalf("queue = %v", q)
	}
	w, _ := q[0]["waitingOn"].(map[string]any)
	if w == nil || w["reason"] != "turn" || w["agentId"] != "carol" || w["turnId"] != "c1" || w["turn"] != float64(1) {
		t.Fatalf("a prompt behind carol's turn shows %v", q[0])
	}
	if w, _ := q[1]["waitingOn"].(map[string]any); w == nil || w["reason"] != "queue" || w["promptId"] != "p1" {
		t.Fatalf("the second prompt shows %v", q[1])
	}

	// carol ends her turn: p1 goes out, p2 waits for its answer.
	b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "carol", "content": "done", "finality": "turn"}), 201, "")
	if p := until(t, b, run, "prompt"); p["messageId"] != "p1" {
		t.Fatalf("prompt frame = %v", p)
	}
	q = promptsOf(b, id)
	if len(q) != 2 || q[0]["runner"] != "alice" || q[0]["waitingOn"] != nil {
		t.Fatalf("queue while p1 is answered = %v", q)
	}
	if w, _ := q[1]["waitingOn"].(map[string]any); w == nil || w["reason"] != "prompt" || w["promptId"] != "p1" || w["agentId"] != "alice" {
		t.Fatalf("the prompt behind p1 shows %v", q[1])
	}
}
