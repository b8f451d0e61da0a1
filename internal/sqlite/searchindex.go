package sqlite

import (
	"context"
	"database/sql"
	"math"
	"time"
)

// A message's text enters the search index a moment after its row is
// written, many rows at a time (migration 17): the write notes the row in
// search_pending, and the indexer indexes what is noted indexPause later,
// in writes of their own. FTS5 writes a segment of its index for each
// statement and each commit that changes it, and merges the segments as
// they pile up: indexing in every write cost the one writer about a fifth
// of its time when many messages stream at once; batched, it writes a
// segment per batch.
//
// Nothing is lost by waiting: the notes are rows of the same transaction
// as the message's, so a row is indexed or noted whatever happens to the
// process; Open indexes what a crash left noted, Close indexes what is
// noted before it closes, and Search indexes what is noted before it reads
// (so that a search finds every row written before it began), up to
// searchIndexChunks writes of it: a backlog larger than that (an import
// of many messages, whose rows no search reads before the import ends)
// is left to the indexer, so that no search waits long.

const (
	// indexPause is how long a noted row waits for others to be indexed
	// with, at most: the time a search by another route than Search (a
	// raw query of the file) may miss a row.
	indexPause = 200 * time.Millisecond
	// indexChunk bounds the rows indexed in one write, so that a backlog
	// (an import's rows) holds the other writes back a little at a time.
	indexChunk = 128
	// searchIndexChunks bounds the indexing writes a search waits for.
	searchIndexChunks = 8
)

// The statements of an indexing write: how many noted rows, up to a
// rowid and a count, and the last of them; the index's insert of the noted
// rows up to a rowid, each found by its rowid (a plan test keeps it so:
// the view makes the text of each row it reads); and the notes' removal.
const (
	notedChunkQuery = `SELECT count(*), max(rid) FROM (SELECT rid FROM search_pending WHERE rid <= ? ORDER BY rid LIMIT ?)`
	indexNotedQuery = `INSERT INTO message_search (rowid, conv, body)
		SELECT rid, conv, body FROM message_search_text WHERE rid IN (SELECT rid FROM search_pending WHERE rid <= ?)`
)

// indexer indexes noted rows indexPause after a commit that may have
// noted some (kick gets a value), until the DB closes.
func (db *DB) indexer(kick <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx := context.Background()
	for db.kicked(kick) && db.paused(indexPause) {
		// An error leaves the rows noted: the next commit's kick, the next
		// search or Close tries again (and a search returns the error).
		_ = db.IndexSearch(ctx)
	}
}

// IndexSearch indexes every row noted for the search index now, rather
// than a moment later. Benchmarks of writes call it to count the indexing
// their writes cost.
func (db *DB) IndexSearch(ctx context.Context) error {
	return db.indexNoted(ctx, math.MaxInt64, math.MaxInt)
}

// indexBeforeSearch indexes the rows noted when it begins, in at most
// searchIndexChunks writes.
func (db *DB) indexBeforeSearch(ctx context.Context) error {
	var upto sql.NullInt64
	if err := db.r.QueryRowContext(ctx, `SELECT max(rid) FROM search_pending`).Scan(&upto); err != nil || !upto.Valid {
		return err
	}
	return db.indexNoted(ctx, upto.Int64, searchIndexChunks)
}

// indexNoted indexes the noted rows whose rowid is at most upto, in at
// most chunks writes of up to indexChunk rows each.
func (db *DB) indexNoted(ctx context.Context, upto int64, chunks int) error {
	for range chunks {
		req, more := db.indexReq(upto)
		if err := db.send(ctx, req); err != nil || !*more {
			return err
		}
	}
	return nil
}

// indexReq is a write that indexes up to indexChunk of the noted rows
// whose rowid is at most upto; *more says, once it is done, whether others
// may be left. Its commit does not kick the indexer.
func (db *DB) indexReq(upto int64) (*writeReq, *bool) {
	more := new(bool)
	fn := func(ctx context.Context, tx *sql.Tx) error {
		var n int
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, notedChunkQuery, upto, indexChunk).Scan(&n, &last); err != nil {
			return err
		}
		*more = n == indexChunk // set, not added to: fn may run twice
		if !last.Valid {
			return nil
		}
		if _, err := tx.ExecContext(ctx, indexNotedQuery, last.Int64); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM search_pending WHERE rid <= ?`, last.Int64)
		return err
	}
	return &writeReq{fn: fn, done: make(chan error, 1), index: true}, more
}

// indexAll indexes every noted row on the writer's goroutine, as it stops.
func (db *DB) indexAll() {
	for {
		req, more := db.indexReq(math.MaxInt64)
		db.logs.acquire()
		db.commit([]*writeReq{req})
		if err := <-req.done; err != nil || !*more {
			return
		}
	}
}

// countIndex returns how many of batch's writes are the search index's own.
func countIndex(batch []*writeReq) int {
	n := 0
	for _, r := range batch {
		if r.index {
			n++
		}
	}
	return n
}
