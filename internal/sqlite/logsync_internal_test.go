package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// newSynced opens the database at path with the default sync (full).
func newSynced(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// createC makes conversation "c" at epoch "e0000000".
func createC(t *testing.T, db *DB) {
	t.Helper()
	c := parley.Conversation{ID: "c", Epoch: "e0000000", CreatedAt: parley.NewTime(time.Now())}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	created := parley.Event{ConversationID: "c", Seq: 1, Type: parley.EventConversationCreated, Finality: parley.FinalityNone, Data: data}
	if err := db.CreateConversation(context.Background(), store.CreateConversationParams{Conversation: c, Events: []parley.Event{created}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

// renewedEpoch reports whether epoch is one the server made in place of
// createC's.
func renewedEpoch(epoch string) bool { return epoch != "e0000000" && parley.ValidEpoch(epoch) }

// traceAt is an append of one trace event to "c" at seq.
func traceAt(seq int64) store.AppendParams {
	ev := parley.Event{ConversationID: "c", Seq: seq, Type: parley.EventTrace, Finality: parley.FinalityNone, Data: []byte(`{}`)}
	return store.AppendParams{ConversationID: "c", ExpectSeq: seq - 1, Events: []parley.Event{ev}}
}

// TestCommittedBeforeSynced checks the order of an append with sync full:
// it is committed (Committed called, every reader sees it) while the log's
// sync is still under way, and answered only once the sync is done.
func TestCommittedBeforeSynced(t *testing.T) {
	db := newSynced(t, filepath.Join(t.TempDir(), "p.db"))
	defer db.Close()
	createC(t, db) // answered: the syncer has read syncFile and let it be
	gate, syncing := make(chan struct{}), make(chan struct{}, 1)
	db.logs.syncFile = func(f *os.File) error {
		syncing <- struct{}{}
		<-gate
		return fdatasync(f)
	}
	committed, done := make(chan struct{}), make(chan error, 1)
	p := traceAt(2)
	p.Committed = func() { close(committed) }
	db.AppendAsync(p, func(err error) { done <- err })
	select {
	case <-committed:
	case <-time.After(10 * time.Second):
		t.Fatal("the append was never committed")
	}
	<-syncing
	h, err := db.Head(context.Background(), "c")
	if err != nil || h.Seq != 2 {
		t.Fatalf("while the sync runs a reader sees head %+v (%v), want seq 2", h, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the append was answered (%v) before its sync was done", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFailedSyncRefusesWrites: once a sync of the log fails, the writes it
// would have made durable fail, as does every later write, with nothing
// more synced; the open file says so, and the next open gives every
// conversation a new epoch (the operating system may have dropped pages
// subscribers were shown).
func TestFailedSyncRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	db := newSynced(t, path)
	createC(t, db)
	syncs := 0
	db.logs.syncFile = func(*os.File) error { syncs++; return errors.New("input/output error") }
	ctx := context.Background()
	for seq := int64(2); seq <= 3; seq++ {
		err := db.Append(ctx, traceAt(seq))
		if parley.ErrorCode(err) != parley.EUNAVAILABLE || !strings.Contains(err.Error(), "restart the server") {
			t.Fatalf("append %d after a failed sync: %v, want EUNAVAILABLE saying to restart", seq, err)
		}
	}
	if syncs != 1 {
		t.Fatalf("%d syncs tried, want 1: a failed sync is not tried again", syncs)
	}
	if b, err := os.ReadFile(db.openPath); err != nil || strings.TrimSpace(string(b)) != syncFailed {
		t.Fatalf("the open file says %q (%v), want %q", b, err, syncFailed)
	}
	_ = db.Close()
	if _, err := os.Stat(db.openPath); err != nil {
		t.Fatalf("Close removed the open file of a database whose sync failed: %v", err)
	}

	db = newSynced(t, path)
	defer db.Close()
	if db.Renewed() != 1 {
		t.Fatalf("reopened after a failed sync: %d conversations renewed, want 1", db.Renewed())
	}
	if h, err := db.Head(ctx, "c"); err != nil || !renewedEpoch(h.Epoch) {
		t.Fatalf("head %+v (%v), want a new epoch", h, err)
	}
}

// TestMachineDownRenewsEpochs checks what an open makes of the files other
// processes left beside the database: one from another boot (the machine
// went down with the database open) renews every conversation's epoch; one
// of this boot whose process ended is removed and renews nothing; one of a
// process that runs is left alone. Close removes the process's own.
func TestMachineDownRenewsEpochs(t *testing.T) {
	boot := bootID()
	if boot == "" {
		t.Skip("this system does not tell its boot id")
	}
	path := filepath.Join(t.TempDir(), "p.db")
	db := newSynced(t, path)
	createC(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	left := func() []string {
		files, _ := filepath.Glob(path + "-open-*")
		return files
	}
	if f := left(); len(f) != 0 {
		t.Fatalf("Close left %v", f)
	}
	ended := 1 << 22 // above Linux's largest pid
	for _, tc := range []struct {
		name    string
		pid     int
		says    string
		renewed int
		kept    bool
	}{
		{"another boot", ended, "another-boot", 1, false},
		{"this boot, its process ended", ended, boot, 0, false},
		{"this boot, its process runs", os.Getppid(), boot, 0, true},
	} {
		other := path + "-open-" + strconv.Itoa(tc.pid)
		if err := os.WriteFile(other, []byte(tc.says+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		db := newSynced(t, path)
		if db.Renewed() != tc.renewed {
			t.Errorf("%s: %d conversations renewed, want %d", tc.name, db.Renewed(), tc.renewed)
		}
		if _, err := os.Stat(other); (err == nil) != tc.kept {
			t.Errorf("%s: the file is kept: %v, want %v", tc.name, err == nil, tc.kept)
		}
		if _, err := os.Stat(db.openPath); err != nil {
			t.Errorf("%s: no open file of this process: %v", tc.name, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(other)
	}
	db = newSynced(t, path)
	defer db.Close()
	if h, err := db.Head(context.Background(), "c"); err != nil || !renewedEpoch(h.Epoch) {
		t.Fatalf("head %+v (%v), want the epoch renewed after the machine went down", h, err)
	}
}

// TestStalledSyncIsUnhealthy: a sync that does not return (a disk that
// stops answering) holds every write's answer; past syncStall, Health says
// the database is unavailable and Stats how long the sync has waited.
// Once it returns, the writes are answered and Health is nil again.
func TestStalledSyncIsUnhealthy(t *testing.T) {
	old := syncStall
	syncStall = 50 * time.Millisecond
	defer func() { syncStall = old }()
	db := newSynced(t, filepath.Join(t.TempDir(), "p.db"))
	defer db.Close()
	createC(t, db)
	if err := db.Health(); err != nil {
		t.Fatalf("health before any stall: %v", err)
	}
	gate, syncing := make(chan struct{}), make(chan struct{}, 1)
	db.logs.syncFile = func(f *os.File) error {
		syncing <- struct{}{}
		<-gate
		return fdatasync(f)
	}
	done := make(chan error, 1)
	db.AppendAsync(traceAt(2), func(err error) { done <- err })
	<-syncing
	deadline := time.Now().Add(10 * time.Second)
	for db.Health() == nil {
		if time.Now().After(deadline) {
			t.Fatal("a sync held for 10 s is still reported healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := db.Health()
	if parley.ErrorCode(err) != parley.EUNAVAILABLE || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("health while the sync is held: %v, want EUNAVAILABLE saying the disk does not answer", err)
	}
	if w := db.Stats().SyncWait; w < syncStall {
		t.Fatalf("Stats().SyncWait = %s while the sync is held, want at least %s", w, syncStall)
	}
	select {
	case err := <-done:
		t.Fatalf("the append was answered (%v) while its sync was held", err)
	default:
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := db.Health(); err != nil {
		t.Fatalf("health once the sync returned: %v", err)
	}
	if w := db.Stats().SyncWait; w != 0 {
		t.Fatalf("Stats().SyncWait = %s between syncs, want 0", w)
	}
}
