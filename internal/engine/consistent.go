package engine

import (
	"context"
	"errors"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// Reads that combine the cached state with rows of the store (a snapshot,
// a streaming message assembled from its row and the chunks after it) must
// see the rows as of the state's seq. With one node they always do: the
// conversation's lock orders every write here. With several, another node
// may write between the state's last look at the log's head and the read
// of a row, and the row is then newer than the state: a snapshot would
// show text past its position, and an assembly would apply chunks its row
// holds already.

// errStale says a row read is newer than the cached state it was read
// for: another node wrote since. The reader catches up and reads again.
var errStale = parley.Errorf(parley.ECONFLICT, "the conversation changed on another node while it was read; retry")

// newerThan reports whether message row m was written after seq.
func newerThan(m *parley.Message, seq int64) bool {
	return max(m.Seq, m.UpdatedSeq) > seq
}

// consistentReads is how often a read is tried on the cached state before
// it is made holding the conversation's lock in the store.
const consistentReads = 3

// readConsistent calls read with the conversation's state, such that what
// read takes from the store is as of that state's seq. With other nodes
// writing, it checks after the read that the log's head has not moved (so
// no row read can be newer), and otherwise catches up and reads again; a
// conversation written without pause is read holding its lock in the
// store, which no writer can pass. c.mu must be held.
func (e *Engine) readConsistent(ctx context.Context, c *conversation, id string, read func(conv.State) error) error {
	if !e.opts.Shared {
		return read(c.state)
	}
	for range consistentReads {
		err := read(c.state)
		if err != nil && !errors.Is(err, errStale) {
			return err
		}
		head, herr := e.store.Head(ctx, id)
		if herr != nil && parley.ErrorCode(herr) != parley.ENOTFOUND {
			return herr
		}
		if err == nil && herr == nil && head == headOf(c.state) {
			return nil
		}
		// Moved on, or gone (deleted, or made again: catchUp drops it).
		if _, err := e.catchUp(ctx, c, id); err != nil {
			return err
		}
	}
	return e.readFenced(ctx, c, id, read)
}

// readFenced calls read with the conversation's state holding its lock in
// the store (with other nodes writing; else as readConsistent), after
// catching up under it: no append is under way anywhere while it reads,
// so what it reads is the last word on everything written before. c.mu
// must be held.
func (e *Engine) readFenced(ctx context.Context, c *conversation, id string, read func(conv.State) error) error {
	if !e.opts.Shared {
		return read(c.state)
	}
	return e.store.Exclusive(ctx, id, func(func(store.AppendParams) error) error {
		if _, err := e.catchUp(ctx, c, id); err != nil {
			return err
		}
		return read(c.state)
	})
}

// ReadAt calls fn with a reader of the store at one moment (store.Store's
// ReadSnapshot) and conversation id's state as of then: what fn reads
// through r is exactly the log up to state.LastSeq and the rows as of
// then, on one node or many, and no writer waits for it. Keep fn short
// (export spools to a file under it): it holds a connection of the
// store. It returns ENOTFOUND for an unknown conversation (or an import
// in progress), or fn's error.
func (e *Engine) ReadAt(ctx context.Context, id string, fn func(r store.Reader, state conv.State) error) error {
	return e.store.ReadSnapshot(ctx, func(r store.Reader) error {
		rec, err := r.GetConversation(ctx, id)
		if err != nil {
			return err
		}
		s, err := stateOf(rec)
		if err == nil {
			s, err = foldTail(ctx, r, s, rec.LastSeq)
		}
		if err != nil {
			return err
		}
		if s.LastSeq != rec.LastSeq {
			return parley.Errorf(parley.EINTERNAL, "conversation %s: the log ends at seq %d but its head says %d", id, s.LastSeq, rec.LastSeq)
		}
		return fn(r, s)
	})
}
