package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
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
		// A message that ended leaving the turn open: the aborted names
		// no streaming message, and still ends the answer's turn.
		"v2 after a message": {`{"type":"message.create","turnId":"r1"}`, `{"type":"message.part.text-delta","turnId":"r1","delta":"Let me look."}`,
			`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finality":"none"}`},
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

// follower is a client following a conversation, with its fold.
type follower struct {
	name string
	s    *client.Stream
	fold client.Fold
	init *client.Init // the last init it was given
}

// upTo folds what the follower is sent until it has seq.
func (fl *follower) upTo(t *testing.T, ctx context.Context, seq int64) {
	t.Helper()
	for {
		if p := fl.s.Position(); p != nil && p.Seq >= seq {
			return
		}
		f, err := fl.s.Next(ctx)
		if err != nil {
			t.Fatalf("%s: %v", fl.name, err)
		}
		if f.Init != nil {
			fl.init = f.Init
		}
		if err := fl.fold.Apply(f); err != nil {
			t.Fatalf("%s: %v", fl.name, err)
		}
	}
}

// shows is what a fold shows: its messages and the streaming texts.
func (fl *follower) shows() string {
	var b strings.Builder
	for _, m := range fl.fold.Messages() {
		fmt.Fprintf(&b, "%s %s %q | ", m.ID, m.Status, m.Content)
	}
	for _, st := range fl.fold.Streaming() {
		fmt.Fprintf(&b, "streaming %+v | ", st)
	}
	return b.String()
}

// TestV1JoinMidAnswerShowsStreamedText: a subscriber that joins with a
// snapshot (no position, or a stale one; over SSE and WebSocket) while a
// v1 runner streams text that no row holds yet gets that text in its
// init, and shows exactly what a subscriber that followed from the start
// shows, at every later point: as the text grows, once a row holds it,
// and when an abort drops it.
func TestV1JoinMidAnswerShowsStreamedText(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	ctx := b.ctx
	id := b.conversationV1()
	run := b.runnerConn(id, b.alice)
	b.prompt(id, "p1", "")
	b.prompt(id, "p2", "")
	until(t, b, run, "prompt")
	viewer := client.New(b.url, b.viewer)
	follow := func(name string, from *parley.Position, tr client.Transport) *follower {
		return &follower{name: name, s: viewer.Subscribe(ctx, id, client.SubscribeOptions{From: from, Transport: tr})}
	}
	all := []*follower{follow("from the start", &parley.Position{}, client.WebSocket)}
	t.Cleanup(func() {
		for _, fl := range all {
			fl.s.Close()
		}
	})
	// same checks that every follower shows what the first one does, once
	// each has what the log holds.
	same := func(step string) string {
		t.Helper()
		seq := int64(b.lastSeq(id))
		for _, fl := range all {
			fl.upTo(t, ctx, seq)
		}
		want := all[0].shows()
		for _, fl := range all[1:] {
			if got := fl.shows(); got != want {
				t.Fatalf("%s, %s shows\n%s\nwant what the follower from the start shows\n%s", step, fl.name, got, want)
			}
		}
		return want
	}
	stream := func(text string) { do(t, b, run, `{"type":"stream","content":"`+text+`"}`) }

	view := b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	stale := staleEpoch(view.body["conversation"].(map[string]any)["epoch"].(string))
	stream("Let me ")
	stream("look")
	all = append(all, follow("ws, no position", nil, client.WebSocket), follow("sse, no position", nil, client.SSE),
		follow("sse, a stale position", &parley.Position{Seq: 1, Epoch: stale}, client.SSE))
	same("joined mid-answer")
	for _, fl := range all[1:] {
		if st := fl.init.Streaming; fl.init.Recovered || len(st) != 1 || st[0].AgentID != "alice" || st[0].Content != "Let me look" || st[0].TurnID != "p1" {
			t.Fatalf("%s: init %+v, want a snapshot with alice's text so far", fl.name, st)
		}
	}
	stream(" further")
	if got := same("more text"); !strings.Contains(got, `Content:Let me look further}`) {
		t.Fatalf("the followers show %s, want the text so far", got)
	}
	do(t, b, run, `{"type":"result","content":"Let me look further."}`)
	if got := same("a row holds the text"); strings.Contains(got, "streaming {") {
		t.Fatalf("the followers show %s, want no streaming text once a row holds it", got)
	}
	stream("Then")
	all = append(all, follow("ws, joined after a row", nil, client.WebSocket))
	same("text after a row")
	do(t, b, run, `{"type":"complete"}`)
	until(t, b, run, "prompt") // p2
	stream("Stopped ")
	all = append(all, follow("sse, joined in the next answer", nil, client.SSE))
	same("the next answer")
	b.want(b.do("POST", "/v1/conversations/"+id+"/abort", b.admin, nil), 202, "")
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted"}`)
	if got := same("aborted"); strings.Contains(got, "streaming {") {
		t.Fatalf("the followers show %s, want the text dropped by the abort", got)
	}
}
