package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// A committer commits the appends of many conversations together (group
// commit), so that PostgreSQL is not bound to one commit, and five round
// trips, per text delta. Each of its lanes takes the appends waiting when
// it is free, up to maxBatch, and writes them in one transaction of five
// round trips whatever their number: BEGIN, the conditional UPDATEs of the
// conversations' seqs (pipelined, in conversation id order, so that two
// groups never wait on each other's row locks in a cycle), one COPY of
// every event, the other rows with one notification, and COMMIT.
//
// An append whose UPDATE matched no row (another writer moved the
// conversation first) is left out of the group and retried alone after
// it, which answers it exactly as an append of its own would. A group that
// fails before COMMIT (an idempotency key used twice, say) is rolled back
// whole and each of its appends retried alone, so that one bad append
// never fails the others. A failed COMMIT is not retried: its outcome is
// unknown, and an append retried after it had committed would be refused
// as stale though it was written.
type committer struct {
	db       *DB
	reqs     chan *appendReq // unbuffered: a request is held only by a lane
	closing  chan struct{}
	stopped  sync.WaitGroup
	once     sync.Once
	maxBatch int
}

// appendReq is an append waiting for its lane.
type appendReq struct {
	p    *store.AppendParams
	done chan error
}

// Group commit's defaults: lanes committing at once (more measured no
// faster on two cores: the work, not the waiting, is what bounds it), and
// appends per group.
const (
	commitLanes    = 2
	commitMaxBatch = 256
)

// errClosed answers an append made after Close.
var errClosed = parley.Errorf(parley.EUNAVAILABLE, "the store is closed")

func newCommitter(db *DB, lanes, maxBatch int) *committer {
	c := &committer{db: db, reqs: make(chan *appendReq), closing: make(chan struct{}), maxBatch: maxBatch}
	c.stopped.Add(lanes)
	for range lanes {
		go c.lane()
	}
	return c
}

// close stops the lanes once they have committed what they hold.
func (c *committer) close() {
	c.once.Do(func() { close(c.closing) })
	c.stopped.Wait()
}

// append hands p to a lane and waits for its outcome. Once a lane holds
// it, the append runs to its end even if ctx ends (as appendOne does).
func (c *committer) append(ctx context.Context, p *store.AppendParams) error {
	r := &appendReq{p: p, done: make(chan error, 1)}
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return errClosed
	}
	return <-r.done
}

// lane commits groups until close.
func (c *committer) lane() {
	defer c.stopped.Done()
	batch := make([]*appendReq, 0, c.maxBatch)
	for {
		select {
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		case <-c.closing:
			return
		}
	fill:
		for len(batch) < c.maxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		c.commit(batch)
	}
}

// commit writes batch as one group and answers each append in it.
func (c *committer) commit(batch []*appendReq) {
	ctx := context.Background()
	if len(batch) == 1 {
		batch[0].done <- c.db.appendOne(ctx, *batch[0].p)
		return
	}
	// Lock order: conversation id, then arrival (a stable sort keeps two
	// appends of one conversation in the order they came).
	slices.SortStableFunc(batch, func(a, b *appendReq) int { return cmp.Compare(a.p.ConversationID, b.p.ConversationID) })
	ps := make([]*store.AppendParams, len(batch))
	for i, r := range batch {
		ps[i] = r.p
	}
	missed, err := c.db.appendGroup(ctx, ps)
	c.db.groups.Add(1)
	var ce commitError
	for i, r := range batch {
		switch {
		case errors.As(err, &ce):
			r.done <- ce.err
		case err != nil || missed[i]:
			r.done <- c.db.appendOne(ctx, *r.p)
		default:
			r.done <- nil
		}
	}
}

// commitError is a failed COMMIT, whose outcome is unknown.
type commitError struct{ err error }

func (e commitError) Error() string { return e.err.Error() }

// appendGroup writes the appends ps (in lock order) in one transaction and
// reports which of them it left out because their conversation had moved
// on. An error other than a commitError means nothing was written.
func (db *DB) appendGroup(ctx context.Context, ps []*store.AppendParams) (missed []bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit; the error is the one returned

	// 1. Take each conversation's row lock, moving its seq on.
	bumps := &pgx.Batch{}
	for _, p := range ps {
		bumps.Queue(bumpConversation, p.ExpectSeq+int64(len(p.Events)), p.State, p.ConversationID, p.ExpectSeq, p.Epoch, lastAt(p.Events))
	}
	results := tx.SendBatch(ctx, bumps)
	missed = make([]bool, len(ps))
	for i := range ps {
		tag, err := results.Exec()
		if err != nil {
			results.Close()
			return nil, err
		}
		missed[i] = tag.RowsAffected() == 0
	}
	if err := results.Close(); err != nil {
		return nil, err
	}

	// 2. Every event in one COPY.
	var rows [][]any
	encs := make([]store.AppendRows, len(ps))
	for i, p := range ps {
		if !missed[i] {
			if encs[i], err = store.EncodeAppend(p); err != nil {
				return nil, err
			}
			rows = appendEventRows(rows, p.ConversationID, p.Events, encs[i])
		}
	}
	if err := copyEvents(ctx, tx, rows); err != nil {
		return nil, err
	}

	// 3. The other rows, and one notification of every conversation's new
	// last seq. A revert's removal of rows (rare) is made in its place in
	// the order of the appends: what the batch holds so far is sent first.
	rest := &pgx.Batch{}
	var lines []string
	queued := false // an earlier append of the same conversation changed its queue
	for i, p := range ps {
		if missed[i] {
			continue
		}
		if len(p.RemoveMessages) > 0 {
			if err := tx.SendBatch(ctx, rest).Close(); err != nil {
				return nil, err
			}
			rest = &pgx.Batch{}
			if err := unrefRows(ctx, tx, p.ConversationID, p.RemoveMessages); err != nil {
				return nil, err
			}
		}
		if err := queueRows(rest, p, encs[i]); err != nil {
			return nil, err
		}
		queued = queued || p.Queue != nil
		if i+1 < len(ps) && ps[i+1].ConversationID == p.ConversationID && !missed[i+1] {
			continue // the next append of this conversation says a later seq
		}
		lines = append(lines, notice(p.ConversationID, p.ExpectSeq+int64(len(p.Events)), queued))
		queued = false
	}
	queueNotify(rest, lines)
	if err := tx.SendBatch(ctx, rest).Close(); err != nil {
		return nil, err
	}

	// 4. COMMIT.
	if err := tx.Commit(ctx); err != nil {
		return nil, commitError{fmt.Errorf("commit: %w", err)}
	}
	return missed, nil
}
