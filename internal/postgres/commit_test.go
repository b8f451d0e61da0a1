package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// TestGroupCommit hands one lane a group of appends directly: good ones,
// two appends of one conversation in a row, a stale one and one reusing a
// request id. Each gets the answer it would get alone, the good ones are
// written in one transaction, and one notification names every
// conversation written with its last seq.
func TestGroupCommit(t *testing.T) {
	db, url := openSchema(t)
	ctx := context.Background()
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	listen, err := listenQuery(ctx, listener)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listener.Exec(ctx, listen); err != nil {
		t.Fatal(err)
	}

	ev := traceEvent
	convs := []string{"g-d", "g-c", "g-b", "g-a", "g-e"} // not in lock order
	for _, id := range convs {
		c := parley.Conversation{ID: id, Epoch: "ep", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: parley.NewTime(time.Now())}
		if err := db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{ev(id, 1)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	used := &store.Idempotency{ConversationID: "g-e", AgentID: "a", Key: "k", RequestHash: "h", Seq: 2, Response: []byte(`{}`)}
	if err := db.appendOne(ctx, store.AppendParams{ConversationID: "g-e", ExpectSeq: 1, Events: []parley.Event{ev("g-e", 2)}, Idempotency: used, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// The channel is the schema's: only this test's appends are heard on
	// it; the filter keeps the wait on its own conversations regardless.
	ours := func(ctx context.Context) (string, error) {
		for {
			n, err := listener.WaitForNotification(ctx)
			if err != nil || strings.HasPrefix(n.Payload, "g-") {
				if err != nil {
					return "", err
				}
				return n.Payload, nil
			}
		}
	}
	if _, err := ours(ctx); err != nil { // appendOne's own
		t.Fatal(err)
	}

	appendTo := func(conv string, after int64, n int) *store.AppendParams {
		p := &store.AppendParams{ConversationID: conv, ExpectSeq: after, State: []byte(`{}`)}
		for i := range n {
			p.Events = append(p.Events, ev(conv, after+int64(i)+1))
		}
		return p
	}
	commit := func(batch ...*store.AppendParams) []error {
		t.Helper()
		reqs := make([]*appendReq, len(batch))
		for i, p := range batch {
			reqs[i] = &appendReq{p: p, done: make(chan error, 1)}
		}
		before := db.groups.Load()
		db.group.commit(reqs)
		if db.groups.Load() != before+1 {
			t.Fatalf("%d groups committed, want 1", db.groups.Load()-before)
		}
		errs := make([]error, len(batch))
		for _, r := range reqs {
			errs[slices.Index(batch, r.p)] = <-r.done
		}
		return errs
	}
	wantCodes := func(errs []error, want ...string) {
		t.Helper()
		for i, err := range errs {
			if got := parley.ErrorCode(err); got != want[i] {
				t.Fatalf("append %d: %v (code %q), want code %q", i, err, got, want[i])
			}
		}
	}
	wantLast := func(want map[string]int64) {
		t.Helper()
		for id, last := range want {
			events, err := db.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, Limit: 10})
			if err != nil || int64(len(events)) != last {
				t.Fatalf("%s: %d events (%v), want %d", id, len(events), err, last)
			}
		}
	}

	errs := commit(
		appendTo("g-d", 1, 3),
		appendTo("g-c", 1, 1),
		appendTo("g-c", 2, 2), // the same conversation again, after the first
		appendTo("g-b", 0, 1), // stale
		appendTo("g-a", 1, 1),
	)
	wantCodes(errs, "", "", "", parley.ECONFLICT, "")
	wantLast(map[string]int64{"g-a": 2, "g-b": 1, "g-c": 4, "g-d": 4})
	// One notification for the group, each conversation once at its last
	// seq, in lock order.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	payload, err := ours(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if payload != "g-a 2\ng-c 4\ng-d 4" {
		t.Fatalf("notified %q, want the lines g-a 2, g-c 4, g-d 4", payload)
	}

	// A request id used before fails the group's transaction: every append
	// in it is retried alone, and only that one is refused.
	reused := appendTo("g-e", 2, 1)
	reused.Idempotency = &store.Idempotency{ConversationID: "g-e", AgentID: "a", Key: "k", RequestHash: "h2", Seq: 3, Response: []byte(`{}`)}
	errs = commit(appendTo("g-a", 2, 1), reused, appendTo("g-b", 1, 2))
	wantCodes(errs, "", parley.EBUSY, "")
	wantLast(map[string]int64{"g-a": 3, "g-b": 3, "g-e": 2})

	// Reverts in a group are made in the order of its appends: g-a's row
	// m1, written before, goes; m2, written by the group's first append of
	// g-a, goes with its second; g-c's m3, written after g-c's removal of
	// it (which found nothing), stays.
	row := func(conv, id string, seq int64) *parley.Message {
		return &parley.Message{ID: id, ConversationID: conv, Seq: seq, Role: parley.RoleUser, AgentID: "a", Parts: []parley.Part{{Type: parley.PartText, Text: id}},
			Content: id, Status: parley.StatusComplete, Turn: 1, TurnID: "t", Finality: parley.FinalityNone}
	}
	first := appendTo("g-a", 3, 1)
	first.Messages = []*parley.Message{row("g-a", "m1", 4)}
	if err := db.appendOne(ctx, *first); err != nil {
		t.Fatal(err)
	}
	writes, removes := appendTo("g-a", 4, 1), appendTo("g-a", 5, 1)
	writes.Messages, removes.RemoveMessages = []*parley.Message{row("g-a", "m2", 5)}, []string{"m1", "m2"}
	removedFirst, writtenAfter := appendTo("g-c", 4, 1), appendTo("g-c", 5, 1)
	removedFirst.RemoveMessages, writtenAfter.Messages = []string{"m3"}, []*parley.Message{row("g-c", "m3", 6)}
	wantCodes(commit(writes, removes, removedFirst, writtenAfter), "", "", "", "")
	for conv, want := range map[string]string{"g-a": "", "g-c": "m3"} {
		ms, err := db.ListMessages(ctx, store.ListMessagesParams{ConversationID: conv, Limit: 10})
		got := ""
		for _, m := range ms {
			got += m.ID
		}
		if err != nil || got != want {
			t.Fatalf("%s holds the rows %q (%v), want %q", conv, got, err, want)
		}
	}
}
