package api_test

import (
	"fmt"
	"testing"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
)

// conversationFormat makes a conversation of alice and bob (round-robin)
// in a message format, with the person "human" as a member.
func (b *bundle) conversationFormat(format string) string {
	b.t.Helper()
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"alice", "bob"}, "members": []string{"human"}, "messageFormat": format})
	b.want(r, 201, "")
	return r.body["conversation"].(map[string]any)["id"].(string)
}

// turnState is the open turn and the guidance of a conversation, as a
// line to compare.
func (b *bundle) turnState(id string) string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	b.want(r, 200, "")
	h := r.body["head"].(map[string]any)
	g, _ := r.body["guidance"].(map[string]any)
	return fmt.Sprintf("open turn %v, last turn %v, guidance %v %v turn %v", h["openTurn"], h["lastTurn"], g["nextAgentId"], g["kind"], g["turn"])
}

// TestV1AbortedAfterStreamedText: a v1 runner that streams text and is
// stopped before any row holds it answers aborted: the prompt ends
// canceled and its turn closes, as a v2 runner's aborted closes the turn
// of the message it streamed; guidance goes to the next agent. So too
// when its last row ended before the text (a tool row, still running,
// which ends with the answer).
func TestV1AbortedAfterStreamedText(t *testing.T) {
	t.Parallel()
	answers := map[string][]string{
		"v1": {`{"type":"stream","content":"Let me "}`, `{"type":"stream","content":"think"}`},
		"v1 after rows": {`{"type":"result","content":"Let me look."}`,
			`{"type":"tool","callId":"c1","toolName":"search","status":"running"}`, `{"type":"stream","content":"Still"}`},
		"v2": {`{"type":"message.create","turnId":"r1"}`, `{"type":"message.part.text-delta","turnId":"r1","delta":"Let me think"}`},
	}
	for name, frames := range answers {
		b := setup(t, engine.Options{}, api.Options{})
		id := b.conversationFormat(name[:2])
		run := b.runnerConn(id, b.alice)
		b.prompt(id, "p1", "")
		until(t, b, run, "prompt")
		for _, f := range frames {
			do(t, b, run, f)
		}
		b.want(b.do("POST", "/v1/conversations/"+id+"/abort", b.admin, nil), 202, "")
		until(t, b, run, "abort")
		do(t, b, run, `{"type":"aborted"}`)
		if q := b.queue(id); len(q) != 0 {
			t.Errorf("%s: queue after aborted %v, want p1 ended", name, q)
		}
		if want, got := "open turn <nil>, last turn 2, guidance bob start_turn turn 3", b.turnState(id); got != want {
			t.Errorf("%s: after aborted %s, want the turn closed and bob next: %s", name, got, want)
		}
		r := b.do("GET", "/v1/conversations/"+id+"/messages", b.viewer, nil)
		for _, m := range r.body["messages"].([]any) {
			if m := m.(map[string]any); m["status"] == "streaming" {
				t.Errorf("%s: message %v still streams after aborted", name, m["id"])
			}
		}
	}
}
