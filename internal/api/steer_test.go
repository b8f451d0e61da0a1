package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// queue returns the prompt queue as "id" (waiting) and "id*" (dispatched).
func (b *bundle) queue(id string) []string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/prompts", b.viewer, nil)
	b.want(r, 200, "")
	var q []string
	for _, p := range r.body["prompts"].([]any) {
		pm := p.(map[string]any)
		s := pm["id"].(string)
		if pm["runner"] != nil {
			s += "*"
		}
		q = append(q, s)
	}
	return q
}

func (b *bundle) prompt(id, pid, mode string) {
	b.t.Helper()
	b.want(b.do("POST", "/v1/conversations/"+id+"/prompts", b.admin, map[string]any{"agentId": "human", "id": pid, "content": "about " + pid, "mode": mode}), 201, "")
}

// answering sets up alice's runner on a conversation of participants,
// queues the prompts (followups) and waits until the first is dispatched
// to the runner.
func answering(t *testing.T, participants []string, prompts ...string) (*bundle, string, *websocket.Conn) {
	t.Helper()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation(participants...)
	run := b.runnerConn(id, b.alice)
	for _, p := range prompts {
		b.prompt(id, p, "")
	}
	if p := until(t, b, run, "prompt"); p["messageId"] != prompts[0] {
		t.Fatalf("first prompt frame %v, want %s", p, prompts[0])
	}
	return b, id, run
}

// TestSteerAfterAborted: a runner answering p1 gets abort when a steer p2
// arrives, answers aborted and nothing more, and is given p2 while it stays
// connected; p1 is never dispatched again. A complete sent after the
// aborted (as older runners do) does not end p2.
func TestSteerAfterAborted(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice"}, "p1")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"Let me think"}`)
	b.prompt(id, "p2", "steer")
	if f := until(t, b, run, "abort"); f["messageId"] != "p1" {
		t.Fatalf("abort frame %v", f)
	}
	do(t, b, run, `{"type":"aborted"}`)
	if p := until(t, b, run, "prompt"); p["messageId"] != "p2" {
		t.Fatalf("after aborted, prompt %v, want the steer", p)
	}
	r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
	if r.body["status"] != "canceled" {
		t.Fatalf("the aborted answer is %v", r.body["status"])
	}
	do(t, b, run, `{"type":"complete"}`) // a late complete of p1
	if q := b.queue(id); len(q) != 1 || q[0] != "p2*" {
		t.Fatalf("a complete right after aborted ended the steer: queue %v", q)
	}
	answer(t, b, run, "r2", "steered")
	if q := b.queue(id); len(q) != 0 {
		t.Fatalf("queue after answering the steer: %v", q)
	}
}

// TestSteerWhileTheRunnerLeaves: a runner that leaves without answering the
// abort does not get its aborted prompt back: the steer goes next.
func TestSteerWhileTheRunnerLeaves(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice"}, "p1", "p0")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	b.prompt(id, "p2", "steer")
	until(t, b, run, "abort")
	run.Close(websocket.StatusNormalClosure, "")
	again := b.runnerConn(id, b.alice)
	if p := until(t, b, again, "prompt"); p["messageId"] != "p2" {
		t.Fatalf("after the runner came back, prompt %v, want the steer (p1 was aborted)", p)
	}
	if q := b.queue(id); len(q) != 2 || q[0] != "p2*" || q[1] != "p0" {
		t.Fatalf("queue %v", q)
	}
}

// TestAbortBeforeAnyMessage: an abort that reaches a runner before it wrote
// anything is answered with aborted alone, which ends the prompt.
func TestAbortBeforeAnyMessage(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice"}, "p1", "p2")
	b.want(b.do("POST", "/v1/conversations/"+id+"/abort", b.admin, nil), 202, "")
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted","messageId":"p1"}`)
	if p := until(t, b, run, "prompt"); p["messageId"] != "p2" {
		t.Fatalf("prompt %v", p)
	}
}

// TestEmptyTextDelta: an empty delta, as model APIs stream them, is
// acknowledged and writes nothing.
func TestEmptyTextDelta(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	run := b.runnerConn(id, b.alice)
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	before := b.log(id)
	ack := send(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":""}`)
	if ack["type"] != "ack" || ack["seq"] != 0.0 {
		t.Fatalf("empty delta answered %v", ack)
	}
	if after := b.log(id); after != before {
		t.Fatalf("an empty delta wrote to the log:\n%s\n%s", before, after)
	}
	if ack := send(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"x"}`); ack["type"] != "ack" || ack["seq"] != 3.0 {
		t.Fatalf("the delta after it answered %v", ack)
	}
}

// TestRevertWhileStreaming: reverting a message while it streams ends it,
// tells its runner (revert, and abort for the prompt it answered), and
// frees the turn, so that other agents can write and the queue moves on.
func TestRevertWhileStreaming(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice", "bob"}, "p1", "p2")
	base := "/v1/conversations/" + id
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"half"}`)
	r := b.do("POST", base+"/revert", b.admin, map[string]any{"agentId": "human", "messageId": "r1"})
	b.want(r, 200, "")
	if f := until(t, b, run, "revert"); f["messageId"] != "r1" {
		t.Fatalf("revert frame %v", f)
	}
	if f := until(t, b, run, "abort"); f["messageId"] != "p1" {
		t.Fatalf("abort frame %v", f)
	}
	v := b.do("GET", base, b.viewer, nil)
	if v.body["head"].(map[string]any)["openTurn"] != nil {
		t.Fatalf("the reverted message's turn is still open: %s", v.raw)
	}
	// Another agent writes at once: the revert freed the turn (nothing
	// else has been sent or answered since).
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "while the runner stops", "finality": "turn"}), 201, "")
	// The runner cannot finalize what is gone; aborted is always accepted.
	if f := send(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`); f["type"] != "error" {
		t.Fatalf("finalize of a reverted message answered %v", f)
	}
	do(t, b, run, `{"type":"aborted"}`)
	if p := until(t, b, run, "prompt"); p["messageId"] != "p2" {
		t.Fatalf("prompt %v", p)
	}
	answer(t, b, run, "r2", "whole")
	b.want(b.do("POST", base+"/messages", b.bob, map[string]any{"content": "my turn"}), 201, "")
}

// TestAbortedEndsThePromptWhateverItsMessageAnswers: a runner whose
// message replies to something else than its prompt (it is still in the
// prompt's exchange) ends the prompt with aborted.
func TestAbortedEndsThePromptWhateverItsMessageAnswers(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice"}, "p1", "p2")
	base := "/v1/conversations/" + id
	b.want(b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "ops", "role": "system", "id": "note", "content": "context"}), 201, "")
	do(t, b, run, `{"type":"message.create","turnId":"r1","replyTo":"note"}`)
	do(t, b, run, `{"type":"aborted"}`)
	if p := until(t, b, run, "prompt"); p["messageId"] != "p2" {
		t.Fatalf("prompt %v", p)
	}
	if r := b.do("GET", base+"/messages/r1", b.viewer, nil); r.body["status"] != "canceled" {
		t.Fatalf("r1 is %v", r.body["status"])
	}
}

// promptHistory lists the prompt events of the conversation's log that name
// prompt pid, as "type" or "type:reason".
func (b *bundle) promptHistory(id, pid string) []string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/events?limit=1000", b.viewer, nil)
	b.want(r, 200, "")
	var h []string
	for _, v := range r.body["events"].([]any) {
		e := v.(map[string]any)
		typ, _ := e["type"].(string)
		data, _ := e["data"].(map[string]any)
		if !strings.HasPrefix(typ, "prompt.") || data["id"] != pid {
			continue
		}
		if reason, _ := data["reason"].(string); reason != "" {
			typ += ":" + reason
		}
		h = append(h, typ)
	}
	return h
}

// TestFinalizeCanceledEndsThePrompt: a runner that ends its answer with
// message.finalize and reason "canceled" (its model stopped, or it was told
// to abort) ends the prompt it answered, as aborted does: the next queued
// prompt is dispatched to it on the same connection, without a complete,
// and the prompt it canceled is never dispatched again, not even when the
// runner disconnects and another connection of its agent comes back.
func TestFinalizeCanceledEndsThePrompt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		steer bool // a steer p2 aborts p1 first; else the runner stops by itself
	}{
		{"the runner stops by itself", false},
		{"after a steer's abort", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, id, run := answering(t, []string{"alice"}, "p1", "p0")
			next, after := "p0", []string{}
			if c.steer {
				b.prompt(id, "p2", "steer")
				if f := until(t, b, run, "abort"); f["messageId"] != "p1" {
					t.Fatalf("abort frame %v", f)
				}
				next, after = "p2", []string{"p0"}
			}
			do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
			do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"Let me th"}`)
			do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"canceled"}`)
			if p := until(t, b, run, "prompt"); p["messageId"] != next {
				t.Fatalf("after a canceled finalize, prompt %v, want %s", p, next)
			}
			if r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil); r.body["status"] != "canceled" || r.body["replyTo"] != "p1" {
				t.Fatalf("the canceled answer: %s", r.raw)
			}
			if h := b.promptHistory(id, "p1"); len(h) == 0 || h[len(h)-1] != "prompt.canceled:aborted" {
				t.Fatalf("p1's events %v, want it to end with prompt.canceled (aborted)", h)
			}
			if q := b.queue(id); !slices.Equal(q, append([]string{next + "*"}, after...)) {
				t.Fatalf("queue %v, want %s being answered, then %v", q, next, after)
			}
			// The runner leaves: what it was given goes back to the front,
			// and p1, which it canceled, does not come back.
			run.Close(websocket.StatusNormalClosure, "")
			again := b.runnerConn(id, b.alice)
			if p := until(t, b, again, "prompt"); p["messageId"] != next {
				t.Fatalf("after the runner came back, prompt %v, want %s (p1 was canceled)", p, next)
			}
			answer(t, b, again, "r2", "answered")
			for _, p := range after {
				if f := until(t, b, again, "prompt"); f["messageId"] != p {
					t.Fatalf("prompt %v, want %s", f, p)
				}
				answer(t, b, again, "r-"+p, "answered")
			}
			if q := b.queue(id); len(q) != 0 {
				t.Fatalf("queue after answering every prompt: %v", q)
			}
			h := b.promptHistory(id, "p1")
			dispatched := 0
			for _, typ := range h {
				if typ == "prompt.dispatched" {
					dispatched++
				}
			}
			if dispatched != 1 || slices.Contains(h, "prompt.requeued") {
				t.Fatalf("p1 was given out again: %v", h)
			}
		})
	}
}
