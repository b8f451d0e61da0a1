package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// TestStatsSayHowBusyTheWriterIs checks what the store tells of its one
// writer: commits and writes are counted, the time it spends committing
// adds up (and never to more than the time that passed), and the writes
// that wait behind a transaction are counted as queued until it ends.
func TestStatsSayHowBusyTheWriterIs(t *testing.T) {
	t.Parallel()
	db := open(t)
	ctx := context.Background()
	c := parley.Conversation{ID: "c", Epoch: "e", CreatedAt: parley.NewTime(time.Now())}
	created := parley.Event{ConversationID: "c", Seq: 1, Type: parley.EventConversationCreated, Finality: parley.FinalityNone, Data: []byte(`{}`)}
	if err := db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{created}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	trace := func(seq int64) store.AppendParams {
		ev := parley.Event{ConversationID: "c", Seq: seq, Type: parley.EventTrace, Finality: parley.FinalityNone, Data: []byte(`{}`)}
		return store.AppendParams{ConversationID: "c", ExpectSeq: seq - 1, Events: []parley.Event{ev}}
	}

	// One append at a time: one commit each.
	before, began := db.Stats(), time.Now()
	const n = 20
	for seq := int64(2); seq < 2+n; seq++ {
		if err := db.Append(ctx, trace(seq)); err != nil {
			t.Fatal(err)
		}
	}
	after, took := db.Stats(), time.Since(began)
	if got := after.Batches - before.Batches; got != n {
		t.Fatalf("%d appends one at a time made %d commits", n, got)
	}
	if got := after.Writes - before.Writes; got != n {
		t.Fatalf("%d appends counted as %d writes", n, got)
	}
	if busy := after.Busy - before.Busy; busy <= 0 || busy > took {
		t.Fatalf("the writer was busy %v over %d commits that took %v in all", busy, n, took)
	}
	if after.Queued != 0 {
		t.Fatalf("%d writes queued with none sent", after.Queued)
	}

	// Writes sent while a transaction holds the writer wait in its queue.
	const waiting = 5
	held, release := make(chan struct{}), make(chan struct{})
	exclusive := make(chan error, 1)
	go func() {
		exclusive <- db.Exclusive(ctx, "c", func(func(store.AppendParams) error) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	done := make(chan error, waiting)
	for i := range waiting {
		db.AppendAsync(trace(2+n+int64(i)), func(err error) { done <- err })
	}
	queued := db.Stats().Queued
	close(release) // before any failure: Close waits for the writer
	if err := <-exclusive; err != nil {
		t.Fatal(err)
	}
	if queued != waiting {
		t.Fatalf("%d writes queued behind a transaction, want %d", queued, waiting)
	}
	for range waiting {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if q := db.Stats().Queued; q != 0 {
		t.Fatalf("%d writes queued after every one was answered", q)
	}
}
