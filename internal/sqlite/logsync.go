package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// With Options.Sync full every write is answered only once the log holds
// it on disk. SQLite would sync the log inside each COMMIT, and every
// reader of the write (a subscriber of its conversation) would wait for the
// sync too. Here the writer commits without syncing (synchronous=NORMAL on
// its connection), tells each write it is committed (AppendParams.Committed:
// the engine publishes its events then), and hands the batch to the syncer,
// which syncs the log (fdatasync of the -wal file) and then answers the
// writes. While one sync runs the writer commits the next batches, and
// one sync answers every batch committed before it began. Under
// synchronous=NORMAL SQLite still syncs the log's header when it starts
// the log over and the log before every checkpoint, so what the syncer
// adds is exactly what synchronous=FULL would: the commit's frames on disk.
//
// So a subscriber may see an event a moment before it is durable. A
// process that crashes loses nothing (the log's pages are in the
// operating system's cache), but a machine that loses power may take back
// the last commits, which subscribers then hold and the log does not: the
// next events would take their positions, and a subscriber resuming from
// one would skip them. So each process that has the database open keeps a
// file beside it, <db>-open-<pid>, naming the machine's boot; Close
// removes it. A database opened while such a file names another boot
// (the machine went down while the process had it open), or says a sync
// failed, gives every conversation a new epoch before anything reads it,
// and every client starts its conversations over rather than trust a
// position the log may no longer have.

// bootIDPath is where Linux tells the boot's id (a variable for tests).
var bootIDPath = "/proc/sys/kernel/random/boot_id"

// syncFailed is what an open file says once a sync of the log failed: the
// operating system may have dropped the pages it could not write, so the
// next open renews the epochs even on the same boot.
const syncFailed = "sync failed"

// bootID returns the id of the machine's boot, or "" where it cannot be
// told (then any process that did not close the database counts as a
// machine that went down).
func bootID() string {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// syncGroup is a committed batch waiting for the syncer: its writes and
// what each came to.
type syncGroup struct {
	reqs    []*writeReq
	results []error
}

// logSync is the syncer's side of a DB: the log file it syncs and the
// file that says this process has the database open.
type logSync struct {
	groups chan syncGroup // committed batches, from the writer
	// ahead holds a value for each batch the writer has begun and the
	// syncer not yet answered: it bounds how far commits run ahead of
	// the syncs (syncAhead).
	ahead chan struct{}
	done  chan struct{} // closed when the syncer has stopped

	walPath, openPath string
	wal               *os.File               // the log, opened by the syncer (its own goroutine)
	syncFile          func(f *os.File) error // fdatasync, but for tests
	// failed is set once a sync failed: every later write is refused.
	mu     sync.Mutex
	failed error
	// since is when the sync under way began (UnixNano), 0 between syncs:
	// a disk that stops answering holds the syncer in fdatasync, and every
	// write waits for it (see Health).
	since atomic.Int64
}

// openFile is the file beside the database at path that says this process
// has it open.
func openFile(path string) string { return path + "-open-" + strconv.Itoa(os.Getpid()) }

// markOpen writes the file that says this process has the database at
// path open on this boot (openFile), after renewing every conversation's
// epoch if a process had it open when the machine went down (see above).
// It returns the number of conversations renewed.
func markOpen(ctx context.Context, db *DB, path string) (int, error) {
	boot := bootID()
	down := false
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return 0, err
	}
	prefix := filepath.Base(path) + "-open-"
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		f := filepath.Join(filepath.Dir(path), e.Name())
		b, err := os.ReadFile(f)
		if err != nil {
			continue // removed meanwhile by the process that closed
		}
		said := string(bytes.TrimSpace(b))
		switch {
		case said == syncFailed, boot != "" && said != boot:
			down = true // a sync failed, or the machine went down
		case processAlive(f):
			continue // another process of this boot has it open now
		case boot == "":
			down = true // its process ended, but on which boot is unknown
		}
		_ = os.Remove(f) // its process ended: this boot, nothing lost
	}
	renewed := 0
	if down {
		renewed, err = db.RenewEpochs(ctx, store.RenewEpochsParams{Epoch: parley.NewEpoch})
		if err != nil {
			return 0, fmt.Errorf("give every conversation a new epoch after the machine went down: %w", err)
		}
	}
	if err := writeSynced(openFile(path), boot); err != nil {
		return 0, err
	}
	return renewed, nil
}

// processAlive reports whether the process named by an open file's suffix
// (-open-<pid>) runs now.
func processAlive(f string) bool {
	i := strings.LastIndex(f, "-")
	pid, err := strconv.Atoi(f[i+1:])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	return signalZero(pid)
}

// writeSynced writes s to the file at path and syncs it and its directory.
func writeSynced(path, s string) error {
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return err
	}
	if err := syncFile(path); err != nil {
		return err
	}
	return syncFile(filepath.Dir(path))
}

// syncer syncs the log after the writer's commits and answers them, until
// the writer closes groups.
func (db *DB) syncer(ls *logSync) {
	defer close(ls.done)
	var groups []syncGroup
	for g := range ls.groups {
		groups = append(groups[:0], g)
	more:
		for {
			select {
			case g, ok := <-ls.groups:
				if !ok {
					break more
				}
				groups = append(groups, g)
			default:
				break more
			}
		}
		err := ls.sync()
		for _, g := range groups {
			for i, r := range g.reqs {
				if err != nil {
					r.finish(err)
				} else {
					r.finish(g.results[i])
				}
			}
		}
		ls.release(len(groups))
		clear(groups)
	}
	if ls.wal != nil {
		_ = ls.wal.Close()
	}
}

// sync syncs the log's data to disk. A failure is kept: every later
// write is refused, and the open file says so, for the next open.
func (ls *logSync) sync() error {
	if err := ls.err(); err != nil {
		return err
	}
	err := ls.syncWAL()
	if err == nil {
		return nil
	}
	err = parley.Errorf(parley.EUNAVAILABLE, "the database could not sync its log to disk (%v): restart the server", err)
	ls.mu.Lock()
	ls.failed = err
	ls.mu.Unlock()
	_ = writeSynced(ls.openPath, syncFailed)
	return err
}

// syncWAL syncs the -wal file, opening it again if it is not the one held
// (SQLite removes the log when the last connection closes; the writer's
// stays open, so this is a safeguard).
func (ls *logSync) syncWAL() error {
	fi, err := os.Stat(ls.walPath)
	if err != nil {
		return err
	}
	if ls.wal != nil {
		if held, err := ls.wal.Stat(); err != nil || !os.SameFile(fi, held) {
			_ = ls.wal.Close()
			ls.wal = nil
		}
	}
	if ls.wal == nil {
		if ls.wal, err = os.OpenFile(ls.walPath, os.O_RDWR, 0); err != nil {
			return err
		}
	}
	ls.since.Store(time.Now().UnixNano())
	defer ls.since.Store(0)
	return ls.syncFile(ls.wal)
}

// syncWait is how long the sync under way has taken so far, 0 if none is.
func (ls *logSync) syncWait() time.Duration {
	if ls == nil {
		return 0
	}
	since := ls.since.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// syncStall is how long a sync of the log may take before Health reports
// the database unavailable (a variable for tests). A sync takes well under
// a millisecond on a local disk and tens of milliseconds on a busy one.
var syncStall = 10 * time.Second

// Health reports whether the database can take writes now: nil, the error
// of a sync that failed (every write is refused until a restart), or
// EUNAVAILABLE when the sync under way has taken longer than syncStall,
// the disk not answering. Writes are committed and seen by subscribers
// meanwhile, but none is answered before the sync returns: /readyz says so
// rather than let a load balancer send more.
func (db *DB) Health() error {
	if err := db.logs.err(); err != nil {
		return err
	}
	if w := db.logs.syncWait(); w > syncStall {
		return parley.Errorf(parley.EUNAVAILABLE, "the database's log has been syncing to disk for %s (the disk does not answer): writes wait for it", w.Round(time.Second))
	}
	return nil
}

// err is the failure of an earlier sync, if any.
func (ls *logSync) err() error {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.failed
}

// syncAhead bounds the batches committed and not yet synced, the one
// being synced among them. With 1 the writer waits for each sync before it
// commits again, and the writes that came meanwhile make one batch.
var syncAhead = 8

// acquire waits until the writer may begin a batch (see ahead).
func (ls *logSync) acquire() {
	if ls != nil {
		ls.ahead <- struct{}{}
	}
}

// release frees n batches' places (see ahead).
func (ls *logSync) release(n int) {
	if ls == nil {
		return
	}
	for range n {
		<-ls.ahead
	}
}

// syncLater hands a committed batch to the syncer, which answers it; it
// reports false if there is no syncer (Options.Sync normal).
func (db *DB) syncLater(batch []*writeReq, results []error) bool {
	if db.logs == nil {
		return false
	}
	db.logs.groups <- syncGroup{reqs: slices.Clone(batch), results: results}
	return true
}
