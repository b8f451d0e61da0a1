package api_test

import (
	"fmt"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// guidanceOf returns who, kind and turn of a guidance frame.
func guidanceOf(f map[string]any) string {
	d := f["data"].(map[string]any)
	return fmt.Sprintf("%v %v %v", d["nextAgentId"], d["kind"], d["turn"])
}

// readUntilSeq reads a subscriber's frames until the event with seq last,
// and returns the guidance frames among them.
func readUntilSeq(t *testing.T, b *bundle, ws *websocket.Conn, last float64) []string {
	t.Helper()
	var gs []string
	for {
		f := readFrame(t, b.ctx, ws)
		switch {
		case f["type"] == "guidance":
			gs = append(gs, guidanceOf(f))
		case f["seq"] == last:
			return gs
		}
	}
}

// TestGuidanceOnlyWhenItChanges: a message streamed in 40 deltas gives its
// subscribers no guidance frame but when who, kind or turn changes; and with
// a prompt waiting for the runner's agent, guidance names that agent (as the
// dispatcher will act), not the one the turn policy would name.
func TestGuidanceOnlyWhenItChanges(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	ws := b.dialWS(id, "")
	in := readFrame(t, b.ctx, ws)
	if g := in["guidance"].(map[string]any); g["nextAgentId"] != "alice" {
		t.Fatalf("init guidance %v", g)
	}
	run := b.runnerConn(id, b.alice)
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	for range 40 {
		do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"word "}`)
	}
	b.prompt(id, "p1", "") // waits: alice's turn is open
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	p := until(t, b, run, "prompt")
	if p["messageId"] != "p1" {
		t.Fatalf("prompt %v", p)
	}
	// A system message changes no guidance: reading up to it reads every
	// guidance frame sent before it.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.admin, map[string]any{"agentId": "ops", "role": "system", "content": "mark"}), 201, "")
	gs := readUntilSeq(t, b, ws, b.lastSeq(id))
	// Alice's runner connects (presence: the runners change); the turn
	// opens (continue alice 1); when it closes, p1 waits for alice's
	// runner, so guidance names alice for turn 2 (round-robin would name
	// bob), and then, with p1's message written, for turn 3.
	want := []string{"alice start_turn 1", "alice continue_turn 1", "alice start_turn 2", "alice start_turn 3"}
	if fmt.Sprint(gs) != fmt.Sprint(want) {
		t.Fatalf("guidance frames %q, want %q", gs, want)
	}
	v := b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	if g := v.body["guidance"].(map[string]any); g["nextAgentId"] != "alice" || g["turn"] != 3.0 {
		t.Fatalf("the conversation's guidance %v, want alice to answer p1", g)
	}
	// A subscriber that joins now gets the current guidance in init.
	late := b.dialWS(id, "")
	if g := readFrame(t, b.ctx, late)["guidance"].(map[string]any); g["nextAgentId"] != "alice" || g["turn"] != 3.0 {
		t.Fatalf("a late subscriber's init guidance %v", g)
	}
}
