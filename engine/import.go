package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/store"
)

// Import writes a conversation's whole history in batches (parley import).
// It holds the conversation from BeginImport to Commit or Abort, so other
// writers to that id wait; readers see the part written so far.
//
// The state is derived as the engine always derives it, by folding the
// imported events with conv.Evolve; the message rows are written as given.
// Checking that the rows agree with the events is the importer's job.
type Import struct {
	e     *Engine
	c     *conversation
	id    string
	state conv.State
	done  bool
}

// BeginImport creates conversation c with a new epoch and its
// conversation.created event (seq 1, at c.CreatedAt), and returns the import
// that appends the rest. It returns EINVALID (or EINVALIDVALUE, ETOOLARGE)
// for a conversation the rules refuse and EBUSY if the id is taken.
func (e *Engine) BeginImport(ctx context.Context, c parley.Conversation) (*Import, error) {
	if e.isClosed() {
		return nil, errClosed
	}
	c.Epoch = newEpoch()
	s, events, err := conv.Create(c, conv.Env{Now: c.CreatedAt.Time, Limits: e.opts.Limits})
	if err != nil {
		return nil, err
	}
	entry := e.entry(c.ID)
	entry.mu.Lock()
	im := &Import{e: e, c: entry, id: c.ID, state: s}
	state, err := json.Marshal(s)
	if err == nil {
		err = e.store.CreateConversation(ctx, store.CreateConversationParams{Conversation: s.Conversation, Events: events, State: state})
	}
	if err != nil {
		im.release()
		return nil, err
	}
	return im, nil
}

// Conversation is the conversation being imported, with its new epoch.
func (im *Import) Conversation() parley.Conversation { return im.state.Conversation }

// LastSeq is the seq of the last event written so far.
func (im *Import) LastSeq() int64 { return im.state.LastSeq }

// State is the conversation's state as of LastSeq.
func (im *Import) State() conv.State { return im.state }

// Append writes events, which must carry the seqs after LastSeq, and message
// rows (inserted, or replacing the row with the same id) in one transaction.
// The events' conversation id is set to the import's.
func (im *Import) Append(ctx context.Context, events []parley.Event, messages []*parley.Message) error {
	if im.done {
		return parley.Errorf(parley.EINTERNAL, "import of %s has ended", im.id)
	}
	for i := range events {
		events[i].ConversationID = im.id
	}
	for _, m := range messages {
		m.ConversationID = im.id
	}
	next := conv.Evolve(im.state, events...)
	state, err := json.Marshal(next)
	if err != nil {
		return err
	}
	err = im.e.store.Append(ctx, store.AppendParams{ConversationID: im.id, ExpectSeq: im.state.LastSeq, Events: events, Messages: messages, State: state})
	if err != nil {
		return err
	}
	im.state = next
	return nil
}

// Commit ends the import: the conversation is served from the store from
// now on, its claim lapses on time, and its streaming messages are finalized
// canceled after the runner grace period unless their runner comes back.
func (im *Import) Commit(ctx context.Context) error {
	if im.done {
		return nil
	}
	defer im.release()
	if err := im.e.reload(ctx, im.c, im.id); err != nil {
		return err
	}
	im.e.scheduleClaimExpiry(im.c, im.id)
	im.e.watchOrphans(im.id, im.c.state)
	return nil
}

// Abort removes everything the import wrote. It is a no-op after Commit.
func (im *Import) Abort() error {
	if im.done {
		return nil
	}
	defer im.release()
	// The caller's context may be what failed; the clean-up must still run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return im.e.store.DeleteConversation(ctx, im.id)
}

// release unlocks the conversation; an entry that was never loaded is
// dropped so that the next user loads it (or learns it does not exist).
func (im *Import) release() {
	im.done = true
	if !im.c.loaded {
		im.e.mu.Lock()
		if im.e.convs[im.id] == im.c {
			delete(im.e.convs, im.id)
		}
		im.e.mu.Unlock()
	}
	im.c.mu.Unlock()
}

// Snapshot calls fn with the conversation's write lock held and its state:
// no write to the conversation lands until fn returns, so what fn reads from
// the store is exactly the log up to state.LastSeq and the rows as of then.
// Keep fn short (export spools to a file under it). It returns ENOTFOUND for
// an unknown conversation, or fn's error.
func (e *Engine) Snapshot(ctx context.Context, id string, fn func(conv.State) error) error {
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	return fn(c.state)
}
