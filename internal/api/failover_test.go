package api_test

import (
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// promptEnds returns the prompt.completed and prompt.canceled events of a
// conversation's log, as "type:id".
func promptEnds(b *bundle, id string) []string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/events?limit=1000", b.viewer, nil)
	b.want(r, 200, "")
	var out []string
	for _, e := range r.body["events"].([]any) {
		ev := e.(map[string]any)
		if ev["type"] == "prompt.completed" || ev["type"] == "prompt.canceled" {
			out = append(out, ev["type"].(string)+":"+ev["data"].(map[string]any)["id"].(string))
		}
	}
	return out
}

// TestRetryKeepsThePrompt: a runner that fails over by ending its answer
// canceled and then creating a retry with retryOf answers the same
// prompt: the retry replies to it and is in its exchange. When the failed
// attempt kept the runner's turn open (finality none, as a failover does),
// the prompt stays with the runner and ends completed with the retry; a
// canceled answer that closes the turn ends its prompt at once, as
// documented, and the retry still replies to that prompt, never to the
// one dispatched since. A canceled answer with finality none that no retry
// follows ends its prompt canceled at complete.
func TestRetryKeepsThePrompt(t *testing.T) {
	t.Parallel()
	for _, finality := range []string{"none", "", "turn"} {
		t.Run("finality="+finality, func(t *testing.T) {
			t.Parallel()
			b := setup(t, engine.Options{}, api.Options{})
			id := b.conversation("alice")
			base := "/v1/conversations/" + id
			run := b.runnerConn(id, b.alice)
			b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p1", "content": "q"}), 201, "")
			b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p2", "content": "q2"}), 201, "")
			if p := until(t, b, run, "prompt"); p["messageId"] != "p1" {
				t.Fatalf("prompt frame = %v", p)
			}
			fin := ""
			if finality != "" {
				fin = `,"finality":"` + finality + `"`
			}
			do(t, b, run, `{"type":"message.create","turnId":"a1"}`)
			do(t, b, run, `{"type":"message.part.text-delta","turnId":"a1","delta":"half"}`)
			do(t, b, run, `{"type":"message.finalize","turnId":"a1","reason":"canceled"`+fin+`}`)
			do(t, b, run, `{"type":"message.create","turnId":"a2","retryOf":"a1"}`)
			do(t, b, run, `{"type":"message.part.text-delta","turnId":"a2","delta":"whole"}`)
			do(t, b, run, `{"type":"message.finalize","turnId":"a2","reason":"end_turn"}`)
			do(t, b, run, `{"type":"complete","messageId":"p1"}`)
			m := b.do("GET", base+"/messages/a2", b.viewer, nil)
			b.want(m, 200, "")
			if m.body["replyTo"] != "p1" || m.body["retryOf"] != "a1" || m.body["turnId"] != "p1" {
				t.Fatalf("the retry = %s", m.raw)
			}
			want := "prompt.completed:p1"
			if finality != "none" {
				want = "prompt.canceled:p1"
			}
			if got := promptEnds(b, id); len(got) != 1 || got[0] != want {
				t.Fatalf("prompt ends = %v, want %s", got, want)
			}
			if finality != "none" {
				return // p2 was dispatched when p1 ended: the retry left it alone
			}

			// The next prompt: canceled keeping the turn, and no retry.
			if p := until(t, b, run, "prompt"); p["messageId"] != "p2" {
				t.Fatalf("prompt frame = %v", p)
			}
			do(t, b, run, `{"type":"message.create","turnId":"b1"}`)
			do(t, b, run, `{"type":"message.finalize","turnId":"b1","reason":"canceled","finality":"none"}`)
			do(t, b, run, `{"type":"complete"}`)
			if got := promptEnds(b, id); len(got) != 2 || got[1] != "prompt.canceled:p2" {
				t.Fatalf("prompt ends = %v", got)
			}
		})
	}
}

// TestStoppedPromptEndsWithAFailoverFinalize: a prompt someone stopped
// ends as soon as its runner ends the answer canceled, even keeping its
// turn open (finality none): no retry of a stopped answer is awaited.
func TestStoppedPromptEndsWithAFailoverFinalize(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "p1", "content": "q"}), 201, "")
	if p := until(t, b, run, "prompt"); p["messageId"] != "p1" {
		t.Fatalf("prompt frame = %v", p)
	}
	do(t, b, run, `{"type":"message.create","turnId":"a1"}`)
	b.want(b.do("POST", base+"/abort", b.bob, nil), 202, "")
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"message.finalize","turnId":"a1","reason":"canceled","finality":"none"}`)
	if got := promptEnds(b, id); len(got) != 1 || got[0] != "prompt.canceled:p1" {
		t.Fatalf("prompt ends = %v", got)
	}
}
