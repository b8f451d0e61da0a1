package reads

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// Snapshot is a conversation as it is at one moment (Reader.At).
type Snapshot struct {
	// Store reads the store at that moment: the log up to State.LastSeq
	// and the rows as of then, as stored.
	Store store.Reader
	// State is the conversation's state then.
	State conv.State
}

// At calls fn with conversation id as it is at one moment, on one node or
// many, read from a snapshot of the store that no writer waits for. Keep
// fn short (an export spools to a file under it): it holds a connection
// of the store. It returns ENOTFOUND for an unknown conversation (or an
// import in progress), or fn's error.
func (r *Reader) At(ctx context.Context, id string, fn func(*Snapshot) error) error {
	return r.streams.ReadAt(ctx, id, func(st store.Reader, s conv.State) error {
		return fn(&Snapshot{Store: st, State: s})
	})
}

// snapshotPage is how many messages EachMessage reads at a time, and
// snapshotPageBytes about how many bytes of them: a page of large
// messages ends early.
const (
	snapshotPage      = 1000
	snapshotPageBytes = 4 << 20
)

// EachMessage calls fn with every message of the conversation, in seq
// order, as readers should see it: one streaming assembled from its row
// and the chunks after it, up to the snapshot. It reads a page of rows at
// a time.
func (s *Snapshot) EachMessage(ctx context.Context, fn func(*parley.Message) error) error {
	id := s.State.Conversation.ID
	for after := int64(0); ; {
		ms, err := s.Store.ListMessages(ctx, store.ListMessagesParams{ConversationID: id, After: after, Limit: snapshotPage, MaxBytes: snapshotPageBytes})
		if err != nil || len(ms) == 0 {
			return err
		}
		after = ms[len(ms)-1].Seq
		for i, m := range ms {
			if m.Status == parley.StatusStreaming {
				// Its row is behind its chunks: all its text so far.
				if err := engine.AssembleMessage(ctx, s.Store, m, s.State.LastSeq); err != nil {
					return err
				}
			}
			if err := fn(m); err != nil {
				return err
			}
			ms[i] = nil // done: let it go
		}
	}
}
