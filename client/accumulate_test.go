package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// contents shows messages by id, status and content, for failures.
func contents(ms []*parley.Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "[%s %s %q] ", m.ID, m.Status, m.Content)
	}
	return b.String()
}

// TestAccumulatorFollowsAStream: an accumulator that joins while a large
// message streams reads it whole (its snapshot summarized it), skips the
// text it read already, grows it with each later delta, says when it
// finished, takes a message written whole as finished at once, drops
// reverted messages, and holds exactly the server's messages.
func TestAccumulatorFollowsAStream(t *testing.T) {
	t.Parallel()
	_, url, ctx := serve(t, engine.Options{SnapshotMessageBytes: 1 << 10}, api.Options{Open: true})
	c := client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	big := strings.Repeat("many words ", 300)
	if _, err := r.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "m1", big); err != nil {
		t.Fatal(err)
	}

	st := c.Subscribe(ctx, id, client.SubscribeOptions{})
	defer st.Close()
	first, err := st.Next(ctx)
	if err != nil || first.Init == nil || len(first.Init.Messages) != 1 || first.Init.Messages[0].Summarized == nil {
		t.Fatalf("the snapshot does not summarize m1: %+v, %v", first, err)
	}
	// Written after the snapshot, before the accumulator reads m1 whole:
	// the copy it reads has it, and the chunk that follows must not add it
	// again.
	if _, err := r.Text(ctx, "m1", "early "); err != nil {
		t.Fatal(err)
	}
	acc := client.NewAccumulator(c, id)
	u, err := acc.Add(ctx, first)
	if err != nil || !u.Reset {
		t.Fatalf("init: %+v, %v", u, err)
	}
	if m := acc.Message("m1"); m == nil || m.Summarized != nil || m.Content != big+"early " {
		t.Fatalf("m1 after the init: %+v", m)
	}
	u = next(t, acc, st)
	if u.Data.EventType() != parley.EventChunk || u.Message != nil {
		t.Fatalf("the chunk it had read already: %+v", u)
	}

	if _, err := r.Text(ctx, "m1", "late"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tool(ctx, "m1", client.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolRunning}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finalize(ctx, "m1", parley.FinishEndTurn, ""); err != nil {
		t.Fatal(err)
	}
	if u := next(t, acc, st); u.Message == nil || u.Message.Content != big+"early late" || u.Finished {
		t.Fatalf("a later chunk: %+v", u)
	}
	if u := next(t, acc, st); u.Message == nil || len(u.Message.Parts) != 2 || u.Message.Parts[1].CallID != "c1" || u.Finished {
		t.Fatalf("the tool call: %+v", u)
	}
	if u := next(t, acc, st); u.Message == nil || u.Message.Status != parley.StatusComplete || !u.Finished {
		t.Fatalf("the finalize: %+v", u)
	}

	q, err := c.PostMessage(ctx, id, client.Message{AgentID: "human", Role: parley.RoleUser, Content: "and?", Finality: parley.FinalityTurn})
	if err != nil {
		t.Fatal(err)
	}
	for u := next(t, acc, st); ; u = next(t, acc, st) {
		if u.Message != nil {
			if u.Message.ID != q.Message.ID || !u.Finished {
				t.Fatalf("a message written whole: %+v", u)
			}
			break
		}
	}
	if _, err := c.Revert(ctx, id, q.Message.ID, "human"); err != nil {
		t.Fatal(err)
	}
	for u := next(t, acc, st); ; u = next(t, acc, st) {
		if u.Removed != nil {
			if !slices.Equal(u.Removed, []string{q.Message.ID}) {
				t.Fatalf("the revert: %+v", u)
			}
			break
		}
	}
	server, err := c.AllMessages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := contents(acc.Messages()), contents(server); got != want {
		t.Fatalf("the accumulator holds %s\nthe server %s", got, want)
	}
}

// next adds the stream's next frame that carries an event, and returns
// what it changed.
func next(t *testing.T, acc *client.Accumulator, st *client.Stream) client.Update {
	t.Helper()
	for u, err := range acc.Updates(t.Context(), st) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Data != nil {
			return u
		}
	}
	panic("unreachable")
}
