package engine_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// beginImport begins an import of id on eng and writes one batch (a trace).
func beginImport(t *testing.T, b *bundle, eng *engine.Engine, id string) *engine.Import {
	t.Helper()
	im, err := eng.BeginImport(b.ctx, parley.Conversation{ID: id, Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, CreatedAt: parley.NewTime(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	appendTrace(t, b, im)
	return im
}

// appendTrace writes one trace event into an import.
func appendTrace(t *testing.T, b *bundle, im *engine.Import) {
	t.Helper()
	e := parley.Event{Seq: im.LastSeq() + 1, Type: parley.EventTrace, Turn: 1, AgentID: "a", Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: []byte(`{}`)}
	if err := im.Append(b.ctx, []parley.Event{e}, nil); err != nil {
		t.Fatal(err)
	}
}

// logged counts what a conversation has in the log.
func logged(t *testing.T, b *bundle, id string) int {
	t.Helper()
	evs, err := b.db.ReadEvents(b.ctx, store.ReadEventsParams{ConversationID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// deadLease is the import lease of the engines these tests stop as if
// their server had died: on SQLite another owner's import is dead at once
// (one process owns the file); on PostgreSQL, once its lease has ended.
const deadLease = 100 * time.Millisecond

// TestBeginImportOverADeadImport: an import left by another engine on the
// same store (a server that died mid-import) is removed by the next
// import of its id, and its importer, should it come back, is refused; an
// import of this engine that is alive keeps its id busy.
func TestBeginImportOverADeadImport(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	dead := engine.New(b.db, engine.Options{ImportLease: deadLease})
	stale := beginImport(t, b, dead, "x")
	dead.Close()
	time.Sleep(2 * deadLease) // on PostgreSQL, where other processes' imports live on, its lease ends

	im := beginImport(t, b, b.eng, "x")
	if n := logged(t, b, "x"); n != 2 {
		t.Fatalf("the new import of x has %d events, want 2 (its own)", n)
	}
	e := parley.Event{Seq: 3, Type: parley.EventTrace, Turn: 1, AgentID: "a", Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: []byte(`{}`)}
	if err := stale.Append(b.ctx, []parley.Event{e}, nil); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("the dead import's importer appends: %v, want busy", err)
	}
	if _, err := b.eng.BeginImport(b.ctx, parley.Conversation{ID: "x", CreatedAt: parley.NewTime(time.Now())}); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("importing over a live import: %v, want busy", err)
	}
	if err := im.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := b.eng.Conversation(b.ctx, "x"); err != nil || v.Head.LastSeq != 2 {
		t.Fatalf("after commit: %+v, %v", v, err)
	}
	// A stale importer cannot commit or abort what is no longer its import.
	if err := stale.Commit(b.ctx); err == nil {
		t.Fatal("a swept import committed")
	}
	if n := logged(t, b, "x"); n != 2 {
		t.Fatalf("the stale importer changed x: %d events", n)
	}
}

// TestImportLeaseRenewedWhileBatchesAreSlow: an import that writes nothing
// for four leases is still alive, because its lease is renewed on a
// timer; once ended, nothing renews it.
func TestImportLeaseRenewedWhileBatchesAreSlow(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{ImportLease: 300 * time.Millisecond})
	im := beginImport(t, b, b.eng, "slow")
	time.Sleep(1200 * time.Millisecond)
	if n, err := b.eng.SweepImports(b.ctx); err != nil || n != 0 {
		t.Fatalf("a slow but live import was swept: %d, %v", n, err)
	}
	appendTrace(t, b, im)
	if err := im.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Conversation(b.ctx, "slow"); err != nil {
		t.Fatal(err)
	}
}

// TestSweepImportsEvery removes a dead import in the background and stops
// when the engine closes.
func TestSweepImportsEvery(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	dead := engine.New(b.db, engine.Options{ImportLease: deadLease})
	beginImport(t, b, dead, "left")
	dead.Close()
	eng := engine.New(b.db, engine.Options{})
	stopped := make(chan struct{})
	go func() { eng.SweepImportsEvery(b.ctx, 10*time.Millisecond); close(stopped) }()
	for deadline := time.Now().Add(5 * time.Second); logged(t, b, "left") > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dead import was not swept in 5s")
		}
	}
	eng.Close()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweeper did not stop when the engine closed")
	}
}
