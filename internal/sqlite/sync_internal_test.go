package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSyncSetting checks that a DB syncs as it was opened to, FULL unless
// told otherwise: the writer commits without syncing (synchronous=NORMAL)
// and, with full, a syncer syncs the log after its commits (logsync.go);
// the readers run with the setting itself (a reader may checkpoint the
// log, and syncs as its setting says).
func TestSyncSetting(t *testing.T) {
	for _, tc := range []struct {
		sync   Sync
		want   int // the readers' PRAGMA synchronous: 1 NORMAL, 2 FULL
		syncer bool
	}{
		{"", 2, true},
		{SyncFull, 2, true},
		{SyncNormal, 1, false},
	} {
		db, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"), Options{Sync: tc.sync})
		if err != nil {
			t.Fatal(err)
		}
		var w, r int
		if err := db.w.QueryRow("PRAGMA synchronous").Scan(&w); err != nil {
			t.Fatal(err)
		}
		if err := db.r.QueryRow("PRAGMA synchronous").Scan(&r); err != nil {
			t.Fatal(err)
		}
		if w != 1 || r != tc.want || (db.logs != nil) != tc.syncer {
			t.Errorf("Sync %q: writer synchronous=%d, reader %d, syncer %v; want 1, %d, %v", tc.sync, w, r, db.logs != nil, tc.want, tc.syncer)
		}
		db.Close()
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"), Options{Sync: "off"}); err == nil {
		t.Error("Sync \"off\" was accepted")
	}
}

// TestCheckpointsOffTheWriter checks that the writer never checkpoints
// (its connection has automatic checkpoints off) and that the checkpointer
// does, after commits: the log's pages reach the database file.
func TestCheckpointsOffTheWriter(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), Options{Sync: SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var auto int
	if err := db.w.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Errorf("the writer checkpoints every %d pages", auto)
	}
	if _, err := db.w.Exec("CREATE TABLE filler (b BLOB)"); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO filler VALUES (randomblob(8000))")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer runs a moment after the last commit: the rows then
	// reach the database file, not only the log.
	var size int64
	for end := time.Now().Add(10 * time.Second); size < 300*8000 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		fi, err := os.Stat(db.path)
		if err != nil {
			t.Fatal(err)
		}
		size = fi.Size()
	}
	if size < 300*8000 {
		t.Errorf("the database file holds %d bytes after 300 rows of 8000: nothing was checkpointed", size)
	}
	var n int
	if err := db.r.QueryRow("SELECT count(*) FROM filler").Scan(&n); err != nil || n != 300 {
		t.Errorf("read %d rows (%v)", n, err)
	}
}

// TestPageCacheSizes checks each connection's page cache: the writer's at
// SQLite's default, the readers' and the checkpointer's small (see dsn),
// and the checkpointer syncing as the others do.
func TestPageCacheSizes(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"), Options{Sync: SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		name        string
		conn        *sql.DB
		cache       int
		readOnly    int
		autoCkpt    int
		synchronous int
	}{
		{"writer", db.w, -2000, 0, 0, 1},
		{"reader", db.r, -256, 1, 1000, 1},
		{"checkpointer", db.ckpt, -64, 0, 0, 1},
	} {
		var cache, readOnly, auto, sync int
		for _, p := range []struct {
			pragma string
			to     *int
		}{{"cache_size", &cache}, {"query_only", &readOnly}, {"wal_autocheckpoint", &auto}, {"synchronous", &sync}} {
			if err := c.conn.QueryRow("PRAGMA " + p.pragma).Scan(p.to); err != nil {
				t.Fatal(err)
			}
		}
		if cache != c.cache || readOnly != c.readOnly || auto != c.autoCkpt || sync != c.synchronous {
			t.Errorf("%s: cache_size %d, query_only %d, wal_autocheckpoint %d, synchronous %d; want %d, %d, %d, %d",
				c.name, cache, readOnly, auto, sync, c.cache, c.readOnly, c.autoCkpt, c.synchronous)
		}
	}
}

// TestRestartTakesTurnsWithTheWriter: a RESTART checkpoint, made while the
// writer commits without pause, never holds the log's write lock at a
// moment the writer wants it. The writer's busy timeout is 0 here, so
// that meeting the lock would fail a write at once (SQLITE_BUSY) rather
// than sleep in SQLite's busy handler.
func TestRestartTakesTurnsWithTheWriter(t *testing.T) {
	defer func(n int) { walRestartPages = n }(walRestartPages)
	walRestartPages = 16 // restart after 16 pages of log, not 16,384
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), Options{Sync: SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.w.Exec("PRAGMA busy_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.Exec("CREATE TABLE filler (b BLOB)"); err != nil {
		t.Fatal(err)
	}
	// Writes from four goroutines keep the writer's queue full until three
	// RESTARTs have been made.
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO filler VALUES (randomblob(8000))")
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for end := time.Now().Add(20 * time.Second); db.restarts.Load() < 3 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("a write met the log locked (after %d restarts): %v", db.restarts.Load(), err)
		}
	}
	if n := db.restarts.Load(); n < 3 {
		t.Fatalf("%d RESTART checkpoints in 20 s of writes, want 3", n)
	}
}
