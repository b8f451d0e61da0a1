package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/store"
)

// TestDelegateStreamsEndWithTheTurn: a worker that alice delegated into
// her open turn reads the conversation while that turn is open, and then no
// more: its SSE stream, its WebSocket stream and its chat resume stream,
// opened while it was delegated, end when the turn ends (alice closes it,
// alice aborts it, an admin aborts it, alice closes the conversation), each
// with an error frame forbidden (close code 4403 on the WebSocket) and
// without any event of the write that ended the turn, or after it. A
// member's stream goes on. A delegate attaches no runner, so none rests on
// the delegation. Rows of docs/security.md.
func TestDelegateStreamsEndWithTheTurn(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t)
	b := f.bundle
	carols := b.dialAs(f.id, f.carol, "/ws")
	readFrame(t, b.ctx, carols) // init
	endings := []struct {
		name string
		end  func()
		last bool // the conversation is closed
	}{
		{name: "alice closes the turn", end: func() {
			b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "all done", "finality": "turn"}), 201, "")
		}},
		{name: "alice aborts the turn", end: func() {
			b.want(b.do("POST", f.base+"/turns/abort", b.alice, map[string]any{"reason": "gave up"}), 200, "")
		}},
		{name: "an admin aborts alice's turn", end: func() {
			b.want(b.do("POST", f.base+"/turns/abort", b.admin, map[string]any{"agentId": "carol", "reason": "stuck"}), 200, "")
		}},
		{name: "alice closes the conversation", last: true, end: func() {
			b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "closed", "finality": "conversation"}), 201, "")
		}},
	}
	for i, ending := range endings {
		// alice opens a turn and brings the worker into it; the worker
		// follows the conversation three ways, and reads while delegated.
		b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": fmt.Sprintf("round %d", i)}), 201, "")
		b.want(b.do("POST", f.base+"/delegations", b.alice, map[string]any{"to": "worker"}), 200, "")
		if i == 0 { // a delegate reads and writes, but attaches no runner
			if status, code := b.dialError(f.base+"/runner", "Authorization", bearer(f.worker)); status != 403 || code != parley.EFORBIDDEN {
				t.Errorf("a delegate attaches a runner: %d %q, want 403 forbidden", status, code)
			}
		}
		worker := b.streams(f.id, f.worker)
		chat := events(t, b.send("GET", "/v1/chat/"+f.id+"/stream", f.worker, nil)) // the answer to prompt pa, under way
		mine := fmt.Sprintf("worker %d", i)
		b.want(b.do("POST", f.base+"/messages", f.worker, map[string]any{"content": mine, "finality": "none"}), 201, "")
		for {
			if m := readFrame(t, b.ctx, worker.ws); m["type"] == "message" && m["data"].(map[string]any)["content"] == mine {
				break
			}
		}
		readable := b.lastSeq(f.id) // the last event the worker may read
		ending.end()
		got := worker.wantEnded(t, 10*time.Second, parley.EFORBIDDEN, 4403, "that turn has ended")
		for name, frames := range got {
			for _, fr := range frames {
				if seq, _ := fr["seq"].(float64); seq > readable {
					t.Errorf("%s: the worker's %s stream got event %v after the turn ended (its last readable event is %v)", ending.name, name, fr, readable)
				}
			}
		}
		wantChatForbidden(t, ending.name, chat)
		b.want(b.do("GET", f.base+"/messages", f.worker, nil), 403, parley.EFORBIDDEN)
		if status, code := b.dialError(f.base+"/ws", "Authorization", bearer(f.worker)); status != 403 || code != parley.EFORBIDDEN {
			t.Errorf("%s: the former delegate dials the stream again: %d %q, want 403 forbidden", ending.name, status, code)
		}
		// carol, a member, reads on: what she writes next (or, once the
		// conversation is closed, the write that closed it) reaches her.
		want := "closed"
		if !ending.last {
			want = fmt.Sprintf("carol %d", i)
			b.want(b.do("POST", f.base+"/messages", f.carol, map[string]any{"content": want, "finality": "turn"}), 201, "")
		}
		for {
			if m := readFrame(t, b.ctx, carols); m["type"] == "message" && m["data"].(map[string]any)["content"] == want {
				break
			}
		}
	}
}

// wantChatForbidden reads a chat stream (AI SDK) to its end and checks that
// it ended with an error saying the turn ended.
func wantChatForbidden(t *testing.T, name string, chat *sseData) {
	t.Helper()
	done := make(chan []chatEvent, 1)
	go func() { done <- chat.all() }()
	var evs []chatEvent
	select {
	case evs = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the worker's chat stream is still open", name)
	}
	if n := len(evs); n < 2 || evs[n-1].data != "[DONE]" || !strings.Contains(evs[n-2].data, `"type":"error"`) || !strings.Contains(evs[n-2].data, "that turn has ended") {
		t.Fatalf("%s: the worker's chat stream ended with %v, want an error saying the turn ended, then [DONE]", name, evs)
	}
}

// TestDelegateStreamsEndWithTheTurnElsewhere: the same when the writes
// come through another server of the same store (another node), several
// at once: alice closes the turn, carol writes, alice opens a new turn and
// brings the worker into it again. The worker's streams on this server
// end when it catches up with those writes, though at the end the worker
// may read again, and carol's message, written while it might not, never
// reaches them.
func TestDelegateStreamsEndWithTheTurnElsewhere(t *testing.T) {
	t.Parallel()
	f := newAccessFixtureOn(t, engine.Options{Shared: true})
	b := f.bundle
	srv, here, _ := serveStore(t, unclosed{b.db}, engine.Options{Shared: true}, runners.Options{}, api.Options{})
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "working on it"}), 201, "")
	b.want(b.do("POST", f.base+"/delegations", b.alice, map[string]any{"to": "worker"}), 200, "")
	node := *b
	node.url = srv.URL
	worker := node.streams(f.id, f.worker)
	readable := b.lastSeq(f.id)
	// Elsewhere (on b's server), which this server does not hear of yet.
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "all done", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", f.carol, map[string]any{"content": "not for the worker", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "a new turn"}), 201, "")
	b.want(b.do("POST", f.base+"/delegations", b.alice, map[string]any{"to": "worker"}), 200, "")
	here.CatchUp(f.id, int64(b.lastSeq(f.id)))
	got := worker.wantEnded(t, 10*time.Second, parley.EFORBIDDEN, 4403, "that turn has ended")
	for name, frames := range got {
		for _, fr := range frames {
			if seq, _ := fr["seq"].(float64); seq > readable {
				t.Errorf("the worker's %s stream got event %v after the turn ended (its last readable event is %v)", name, fr, readable)
			}
		}
	}
	// In the new turn it may read again.
	node.want(node.do("GET", f.base+"/messages", f.worker, nil), 200, "")
}

// unclosed is a store that another server shares: closing it is left to
// its first server.
type unclosed struct{ store.Store }

func (unclosed) Close() error { return nil }
