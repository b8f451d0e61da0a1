package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// SQLite in WAL mode appends every commit to the write-ahead log; a
// checkpoint copies the log's pages into the database file (syncing it) so
// that the log can start over. Left to itself SQLite checkpoints inside the
// commit that crosses 1000 pages of log, so that one commit in a few hundred
// waits for the copy and its syncs. Here the writer never checkpoints
// (wal_autocheckpoint is off on its connection): a goroutine of its own does,
// on a connection of its own, a moment after commits happen. A PASSIVE
// checkpoint runs beside the writer and the readers without blocking them;
// only when the log has grown past walRestartPages (readers kept it from
// starting over) and was copied whole does a RESTART checkpoint wait,
// briefly holding writers back, until the log can start from the beginning.
//
// A RESTART takes the log's write lock. Left to SQLite, it would poll for
// the lock between the writer's transactions, sleeping in the busy handler
// (1, 2, 5, 10 ms and longer) while the writer commits, and the writer
// would find the lock taken at its next BEGIN and sleep in its own busy
// handler, for longer than most RESTARTs last. Here the two take turns on
// DB.logMu instead: the RESTART starts as soon as the transaction under way
// ends, and the writer goes on as soon as the RESTART is done.

// walRestartPages is how long the log may grow (in 4 KiB pages) before a
// checkpoint waits for readers to let it start over (a variable for tests).
var walRestartPages = 16384

const (
	// checkpointPause is the least time between two checkpoints. A page
	// written by many commits meanwhile (a conversation's index leaf, its
	// row) is copied once: a second against a tenth of one gave 4.5% more
	// deltas a second at 100 streaming conversations and half the p99
	// latency at 1000 (BENCHMARKS.md). With synchronous=NORMAL the log
	// reaches the disk at checkpoints, so a power loss may take back the
	// commits of that last second.
	checkpointPause = time.Second
)

// checkpointer checkpoints after commits until the DB closes. kick gets a
// value after every commit.
func (db *DB) checkpointer(conn *sql.DB, kick <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx := context.Background()
	for db.kicked(kick) {
		var busy, pages, copied int
		// RESTART holds writers back until every reader has left the log,
		// for up to the busy timeout, again each round: behind a reader of
		// an old snapshot (an online backup holds one for as long as it
		// copies) that would stall writers for seconds at a time. So only
		// when the PASSIVE checkpoint could copy the whole log, which no
		// reader of an old snapshot lets it, is the log made to start over.
		if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &pages, &copied); err == nil && pages > walRestartPages && copied == pages {
			db.logMu.Lock()
			err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &pages, &copied)
			db.logMu.Unlock()
			if err == nil && busy == 0 {
				db.restarts.Add(1)
			}
		}
		if !db.paused(checkpointPause) {
			return
		}
	}
}

// kicked waits for a value on kick, and reports whether it came before
// the DB began to close.
func (db *DB) kicked(kick <-chan struct{}) bool {
	select {
	case <-kick:
		return true
	case <-db.closing:
		return false
	}
}

// paused waits for d to pass, and reports whether it did before the DB
// began to close.
func (db *DB) paused(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-db.closing:
		return false
	}
}
