// Package sqlite is the SQLite store of Parley, on the pure-Go driver
// modernc.org/sqlite. The database runs in WAL mode with one writer
// connection and a pool of read-only connections. Every write goes through one
// goroutine that commits whatever writes are waiting in one transaction (group
// commit); a batch in which one write fails is run again with each write in
// its own savepoint, so that a failing write takes nothing else down with it.
// With synchronous full, a syncer syncs the log after the commits and answers
// their writes, which are readable from the commit on (logsync.go).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options configure a DB. Zero values take the defaults.
type Options struct {
	// MaxBatch bounds the writes committed in one transaction (default 256).
	MaxBatch int
	// Readers is the size of the read connection pool (default 4).
	Readers int
	// Sync says how durable a write is when it is answered: SyncFull (the
	// default) syncs the log to disk after every commit, before the commit's
	// writes are answered, so an acknowledged write survives power loss;
	// SyncNormal syncs only at checkpoints, so it survives the process
	// crashing but a power loss may take the last commits back.
	Sync Sync
	// Logger receives nothing today; it is kept for symmetry with other stores.
	Logger *slog.Logger
}

// Sync names how durable a commit is before it is acknowledged.
type Sync string

// The synchronous settings a DB may run with.
const (
	SyncFull   Sync = "full"   // a commit survives power loss (the default)
	SyncNormal Sync = "normal" // a commit survives a crash of the process
)

// ParseSync reads a -sqlite-sync flag's value.
func ParseSync(s string) (Sync, error) {
	switch Sync(s) {
	case SyncFull, SyncNormal:
		return Sync(s), nil
	}
	return "", fmt.Errorf("sqlite sync must be full or normal, not %q", s)
}

// DB is a store.Store on one SQLite file. It is safe for concurrent use.
type DB struct {
	reader // reads over r
	path   string
	w      *sql.DB // one connection: the writer
	r      *sql.DB // read-only pool
	opts   Options

	reqs    chan *writeReq
	closing chan struct{}
	stopped chan struct{}
	once    sync.Once

	// batches, writes and busy (nanoseconds) are counted for Stats;
	// restarts counts the RESTART checkpoints that started the log over
	// (for tests).
	batches, writes, busy, restarts atomic.Int64
	stmts                           statements

	// logMu is held by the writer over each transaction and by the
	// checkpointer over a RESTART checkpoint (see checkpoint.go).
	logMu    sync.Mutex
	ckpt     *sql.DB       // the checkpointer's connection
	kick     chan struct{} // wakes the checkpointer after a commit
	ckptDone chan struct{} // closed when the checkpointer has stopped

	indexKick chan struct{} // wakes the indexer after a commit (searchindex.go)
	indexDone chan struct{} // closed when the indexer has stopped

	// logs is the syncer's, with Options.Sync full; nil with normal
	// (see logsync.go).
	logs *logSync
	// openPath is this process's file beside the database, which says it
	// has it open (logsync.go); Close removes it.
	openPath string
	// renewed counts the conversations given a new epoch at Open because
	// the machine went down while the database was open.
	renewed int
}

var _ store.Store = (*DB)(nil)

// Stats counts group commits of the store's writes (the search index's
// own writes, which index what the store's writes noted, are not counted
// in Batches and Writes), and how busy the one writer is.
type Stats struct {
	// Batches is the number of transactions committed.
	Batches int64
	// Writes is the number of write requests in them.
	Writes int64
	// Busy is the time the writer has spent committing, from the start of
	// each transaction to its commit (the search index's batches too):
	// over an interval, its growth divided by the interval is the share of
	// the time the writer was busy. A transaction counts once committed.
	Busy time.Duration
	// Queued is the number of writes waiting for the writer now.
	Queued int
	// SyncWait is how long the sync of the log under way has taken so far
	// (0 if none is, or with Options.Sync normal): see Health.
	SyncWait time.Duration
}

// A connection's role decides its pragmas (see dsn).
type connRole int

const (
	roleWriter       connRole = iota // the one connection that writes
	roleReader                       // one of the read-only pool
	roleCheckpointer                 // the checkpointer's own (see checkpoint.go)
)

// dsn returns the connection string for path with the pragmas Parley needs
// for a connection of role.
//
// Each connection's page cache is sized for what it reads. SQLite's
// allocator here (the pure-Go one the driver brings) gives each cached
// page, 4 KiB and SQLite's header for it, a slot of 8 KiB, so a cache costs
// about twice its nominal size. The writer keeps SQLite's default of 2 MB
// (its pages are the ones every append touches). A reader's pages come
// from the database file and the log, which the OS caches already: 256
// KiB each reads events as fast as 2 MB did, and a search, which walks the
// index's pages, is not slowed as it is with 64 KiB (BENCHMARKS.md). The
// checkpointer copies the log into the file and reads nothing a cache
// helps; left at the default its cache still filled, some 4 MB of memory
// at a thousand streaming conversations.
func dsn(path string, role connRole, sync Sync) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	if role == roleWriter {
		// The writer's commits do not sync: with SyncFull the syncer
		// syncs the log after them (logsync.go).
		sync = SyncNormal
	}
	q.Add("_pragma", "synchronous("+strings.ToUpper(string(sync))+")")
	q.Add("_pragma", "foreign_keys(ON)")
	switch role {
	case roleReader:
		q.Add("_pragma", "query_only(ON)")
		q.Add("_pragma", "cache_size(-256)")
	case roleCheckpointer:
		q.Add("_pragma", "cache_size(-64)")
	}
	if role != roleReader {
		// The checkpointer checkpoints, not the commits (see checkpoint.go).
		q.Add("_pragma", "wal_autocheckpoint(0)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path, migrates it to the
// latest schema and starts the writer.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	if opts.Sync == "" {
		opts.Sync = SyncFull
	}
	if _, err := ParseSync(string(opts.Sync)); err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite", dsn(path, roleWriter, opts.Sync))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if _, _, err := migrate(ctx, w, path); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, roleReader, opts.Sync))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(opts.Readers)
	r.SetMaxIdleConns(opts.Readers)
	ckpt, err := sql.Open("sqlite", dsn(path, roleCheckpointer, opts.Sync))
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	ckpt.SetMaxOpenConns(1)
	db := &DB{reader: reader{q: r}, path: path, w: w, r: r, ckpt: ckpt, opts: opts,
		reqs: make(chan *writeReq, opts.MaxBatch), closing: make(chan struct{}), stopped: make(chan struct{}),
		kick: make(chan struct{}, 1), ckptDone: make(chan struct{}),
		indexKick: make(chan struct{}, 1), indexDone: make(chan struct{})}
	if err := db.stmts.prepare(ctx, w); err != nil {
		db.w.Close()
		db.r.Close()
		db.ckpt.Close()
		return nil, err
	}
	// Rows a crash left noted for the search index are indexed at once.
	var noted bool
	if err := w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM search_pending)`).Scan(&noted); err != nil {
		db.stmts.close()
		db.w.Close()
		db.r.Close()
		db.ckpt.Close()
		return nil, err
	}
	if noted {
		db.indexKick <- struct{}{}
	}
	db.openPath = openFile(path)
	if opts.Sync == SyncFull {
		db.logs = &logSync{groups: make(chan syncGroup, syncAhead), ahead: make(chan struct{}, syncAhead), done: make(chan struct{}),
			walPath: path + "-wal", openPath: db.openPath, syncFile: fdatasync}
		go db.syncer(db.logs)
	}
	go db.checkpointer(ckpt, db.kick, db.ckptDone)
	go db.writer()
	go db.indexer(db.indexKick, db.indexDone)
	renewed, err := markOpen(ctx, db, path)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	db.renewed = renewed
	return db, nil
}

// Renewed returns the number of conversations Open gave a new epoch,
// because the machine went down while the database was open and the last
// events their subscribers saw may not have reached the disk.
func (db *DB) Renewed() int { return db.renewed }

// Stats returns how many batches and writes were committed, how long the
// writer has been busy, and how many writes wait for it.
func (db *DB) Stats() Stats {
	return Stats{Batches: db.batches.Load(), Writes: db.writes.Load(), Busy: time.Duration(db.busy.Load()), Queued: len(db.reqs), SyncWait: db.logs.syncWait()}
}

// Close stops accepting writes, finishes those already queued and closes
// the database.
func (db *DB) Close() error {
	db.once.Do(func() { close(db.closing) })
	<-db.stopped
	<-db.ckptDone
	<-db.indexDone
	db.stmts.close()
	// The writer's connection closes last: closing the last connection
	// checkpoints the whole log and removes it.
	err := errors.Join(db.ckpt.Close(), db.r.Close(), db.w.Close())
	if err == nil && db.logs.err() == nil { // a failed sync stays said, for the next open
		if rerr := os.Remove(db.openPath); rerr != nil && !os.IsNotExist(rerr) {
			err = rerr
		}
	}
	return err
}

// writeReq is one write waiting for the writer.
type writeReq struct {
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error  // gets the result, or
	cb   func(error) // is called with it
	// index is set for a write of the search index's own (indexReq), whose
	// commit gives the indexer nothing to do.
	index bool
	// committed, if set, is called once the write is committed, before
	// its result if that waits for the log's sync (AppendParams.Committed).
	committed func()
}

// finish hands a request its result.
func (r *writeReq) finish(err error) {
	if r.cb != nil {
		r.cb(err)
		return
	}
	r.done <- err
}

var errClosed = parley.Errorf(parley.EUNAVAILABLE, "the database is closed")

// write runs fn in the next group commit and returns its own result. Once the
// request is queued it waits for the commit even if ctx ends, so that the
// answer always says what happened. fn may run twice (when another write
// of its batch fails, the batch is rolled back and run again: see commit),
// so what it reports outside the transaction it must set, not add to.
func (db *DB) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return db.send(ctx, &writeReq{fn: fn, done: make(chan error, 1)})
}

// writeCommitted is write with a committed hook (writeReq.committed).
func (db *DB) writeCommitted(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error, committed func()) error {
	return db.send(ctx, &writeReq{fn: fn, done: make(chan error, 1), committed: committed})
}

// send queues req, which has a done channel, and returns its result, as
// write does.
func (db *DB) send(ctx context.Context, req *writeReq) error {
	select {
	case <-db.closing:
		return errClosed
	default:
	}
	select {
	case db.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-db.closing:
		return errClosed
	}
	return <-req.done
}

// writeAsync queues fn for the next group commit and calls done with its
// result (on the writer's goroutine, or the syncer's). It waits only while the writer's
// queue is full.
func (db *DB) writeAsync(fn func(ctx context.Context, tx *sql.Tx) error, committed func(), done func(error)) {
	req := &writeReq{fn: fn, cb: done, committed: committed}
	select {
	case <-db.closing:
		done(errClosed)
		return
	default:
	}
	select {
	case db.reqs <- req:
	case <-db.closing:
		done(errClosed)
	}
}

// writer commits queued writes in batches until Close.
func (db *DB) writer() {
	defer close(db.stopped)
	if db.logs != nil {
		defer func() {
			close(db.logs.groups) // the syncer answers what it has, then stops
			<-db.logs.done
		}()
	}
	batch := make([]*writeReq, 0, db.opts.MaxBatch)
	for {
		var first *writeReq
		select {
		case first = <-db.reqs:
		case <-db.closing:
			// Finish what was queued before Close, then stop.
			for {
				select {
				case r := <-db.reqs:
					db.logs.acquire()
					db.commit([]*writeReq{r})
				default:
					db.indexAll()
					return
				}
			}
		}
		db.logs.acquire() // the writes that come meanwhile join the batch
		batch = append(batch[:0], first)
	fill:
		for len(batch) < db.opts.MaxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		db.commit(batch)
	}
}

// commit runs a batch in one transaction. Each request runs as it is,
// which is what every one of them does almost always (the engine decides
// a write on the state it holds): if one fails, the transaction is rolled
// back and the batch run again, each request in a savepoint, so that a
// failing request takes nothing else down with it.
func (db *DB) commit(batch []*writeReq) {
	if err := db.logs.err(); err != nil {
		db.logs.release(1)
		for _, r := range batch {
			r.finish(err) // a sync failed: nothing more is written
		}
		return
	}
	start := time.Now()
	ctx := context.Background()
	results := make([]error, len(batch))
	db.logMu.Lock()
	whole, err := db.commitWhole(ctx, batch)
	if !whole {
		err = func() error {
			tx, err := db.w.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			for i, r := range batch {
				results[i] = db.savepoint(ctx, tx, r.fn)
			}
			return tx.Commit()
		}()
	}
	db.logMu.Unlock()
	db.busy.Add(int64(time.Since(start))) // before the answers: a caller woken by one sees it
	select {
	case db.kick <- struct{}{}:
	default:
	}
	// The search index's own writes are not the store's writes: they are
	// not counted, and give the indexer nothing more to do.
	if writes := len(batch) - countIndex(batch); writes > 0 {
		db.batches.Add(1)
		db.writes.Add(int64(writes))
		select {
		case db.indexKick <- struct{}{}:
		default:
		}
	}
	if err == nil {
		for i, r := range batch {
			if results[i] == nil && r.committed != nil {
				r.committed()
			}
		}
		if db.syncLater(batch, results) {
			return // the syncer answers
		}
	}
	db.logs.release(1)
	for i, r := range batch {
		if err != nil {
			r.finish(fmt.Errorf("commit: %w", err))
		} else {
			r.finish(results[i])
		}
	}
}

// commitWhole runs a batch in one transaction with no savepoints. It
// reports whole false, having rolled back, if a request failed, and
// otherwise what the commit came to.
func (db *DB) commitWhole(ctx context.Context, batch []*writeReq) (whole bool, err error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return true, err
	}
	for _, r := range batch {
		if err := r.fn(ctx, tx); err != nil {
			_ = tx.Rollback()
			return false, nil
		}
	}
	return true, tx.Commit()
}

// savepoint runs fn so that its writes are undone if it fails.
func (db *DB) savepoint(ctx context.Context, tx *sql.Tx, fn func(context.Context, *sql.Tx) error) error {
	if _, err := tx.StmtContext(ctx, db.stmts.savepoint).ExecContext(ctx); err != nil {
		return err
	}
	release := tx.StmtContext(ctx, db.stmts.release)
	if err := fn(ctx, tx); err != nil {
		if _, rerr := tx.StmtContext(ctx, db.stmts.rollbackTo).ExecContext(ctx); rerr != nil {
			return errors.Join(err, rerr)
		}
		if _, rerr := release.ExecContext(ctx); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := release.ExecContext(ctx)
	return err
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }
