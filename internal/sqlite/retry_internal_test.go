package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// TestBatchRunAgainReportsOnce: when a write of a group commit fails, the
// batch is rolled back and every other write is run again; what a write
// reports (here the references a compaction made) must count its last run
// only. A compaction and a failing write are queued behind a write that
// holds the writer, so that they share a batch.
func TestBatchRunAgainReportsOnce(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := parley.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := parley.Conversation{ID: "c1", Epoch: "ep", TurnPolicy: parley.PolicyFree, CreatedAt: at}
	created := parley.Event{ConversationID: "c1", Seq: 1, Type: parley.EventTrace, Finality: parley.FinalityNone, Time: at, Data: json.RawMessage(`{}`)}
	if err := db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{created}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	m := &parley.Message{ID: "m1", ConversationID: "c1", Seq: 2, Role: parley.RoleAssistant, AgentID: "a", Status: parley.StatusComplete,
		Parts: []parley.Part{{Type: parley.PartText, Text: "hi"}}, Content: "hi", Finality: parley.FinalityNone, CreatedAt: at, UpdatedAt: at}
	data, _ := json.Marshal(m)
	posted := parley.Event{ConversationID: "c1", Seq: 2, Type: parley.EventMessage, AgentID: "a", Finality: parley.FinalityNone, Time: at, Data: data}
	if err := db.Append(ctx, store.AppendParams{ConversationID: "c1", ExpectSeq: 1, Events: []parley.Event{posted}, Messages: []*parley.Message{m}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// The event holds its data, as in a log written before such events
	// were stored as references when written: compaction makes the one.
	if err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE events SET ref = NULL, data = ? WHERE conversation_id = 'c1' AND seq = 2 AND ref = 'm1'`, data)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	before := db.Stats().Batches
	release, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = db.write(ctx, func(context.Context, *sql.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	type compacted struct {
		res store.CompactResult
		err error
	}
	done := make(chan compacted, 1)
	go func() {
		now := at.Add(30 * 24 * time.Hour)
		res, err := db.Compact(ctx, store.CompactParams{ConversationID: "c1", Now: parley.NewTime(now), Before: parley.NewTime(now.Add(-time.Hour))})
		done <- compacted{res, err}
	}()
	failed := make(chan error, 1)
	go func() {
		for len(db.reqs) < 1 { // the compaction is queued first
			time.Sleep(time.Millisecond)
		}
		failed <- db.write(ctx, func(context.Context, *sql.Tx) error { return errors.New("refused") })
	}()
	for len(db.reqs) < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-failed; err == nil || err.Error() != "refused" {
		t.Fatalf("the failing write: %v", err)
	}
	got := <-done
	if got.err != nil || got.res.Referenced != 1 {
		t.Fatalf("the compaction, run again with its batch: %+v, %v; want 1 reference", got.res, got.err)
	}
	if n := db.Stats().Batches - before; n != 2 {
		t.Fatalf("%d batches after the holding write's: the compaction and the failing write were not committed together", n-1)
	}
}
