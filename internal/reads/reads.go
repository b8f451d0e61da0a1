// Package reads answers the reads of conversations as readers should see
// them: messages (a message still streaming assembled from its row and
// the chunks after it, which the engine holds), replies and threads,
// pages of events, search, tasks, the outbox's deliveries, and a whole
// conversation at one moment for export. Each read is bounded by the
// limits its caller passes, as a page of the store is.
//
// It reads rows from the store (Store) and asks the engine only what
// the store cannot tell: which messages stream now and how far
// (Streams).
package reads

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// Store is what the read side reads from the store (store.Store is one).
type Store interface {
	store.Reader
	MessageKey(ctx context.Context, conversationID, messageID string) (*store.MessageKey, error)
	ListReplies(ctx context.Context, p store.ListRepliesParams) ([]*parley.Message, error)
	Ancestors(ctx context.Context, p store.ThreadParams) ([]*parley.Message, error)
	Descendants(ctx context.Context, p store.ThreadParams) ([]*parley.Message, error)
	Search(ctx context.Context, p store.SearchParams) ([]parley.SearchHit, error)
	GetTask(ctx context.Context, id string) (*parley.Task, error)
	ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]*parley.Delivery, error)
}

// Streams is what the read side asks of the engine, which holds the
// messages that stream assembled (*engine.Engine is one).
type Streams interface {
	// Streaming returns the messages of a conversation that stream now
	// and that want chooses (by id and author), assembled so far and
	// complete as of their UpdatedSeq, oldest first, as of a state of the
	// conversation no older than the rows read before the call. It
	// returns ENOTFOUND for an unknown conversation.
	Streaming(ctx context.Context, conversationID string, want func(messageID, agentID string) bool) ([]*parley.Message, error)
	// ReadAt calls fn with a reader of the store at one moment and the
	// conversation's state as of then.
	ReadAt(ctx context.Context, conversationID string, fn func(r store.Reader, state conv.State) error) error
	// Require applies rule to the conversation's current state. It
	// returns ENOTFOUND for an unknown conversation, or rule's error.
	Require(ctx context.Context, conversationID string, rule func(conv.State) error) error
}

// Reader answers reads. It is safe for concurrent use.
type Reader struct {
	st      Store
	streams Streams
}

// New returns the read side over st and the engine's streams.
func New(st Store, streams Streams) *Reader {
	return &Reader{st: st, streams: streams}
}

// Events returns a page of a conversation's log (store.Reader.ReadEvents).
func (r *Reader) Events(ctx context.Context, p store.ReadEventsParams) ([]parley.Event, error) {
	return r.st.ReadEvents(ctx, p)
}

// MessageKey returns what the store keeps of a message beside its row,
// without reading the row. It returns ENOTFOUND.
func (r *Reader) MessageKey(ctx context.Context, conversationID, messageID string) (*store.MessageKey, error) {
	return r.st.MessageKey(ctx, conversationID, messageID)
}

// StoredMessage returns a message's row as stored: while the message
// streams, the row is behind its chunks (Message assembles it). It returns
// ENOTFOUND.
func (r *Reader) StoredMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	return r.st.GetMessage(ctx, conversationID, messageID)
}

// Search returns a page of the messages that match p.Query, best first
// (store.Store.Search).
func (r *Reader) Search(ctx context.Context, p store.SearchParams) ([]parley.SearchHit, error) {
	return r.st.Search(ctx, p)
}

// Task returns a task. It returns ENOTFOUND.
func (r *Reader) Task(ctx context.Context, id string) (*parley.Task, error) {
	return r.st.GetTask(ctx, id)
}

// Deliveries returns a page of the outbox's channel auto-replies of one
// status, by id (store.Store.ListDeliveries).
func (r *Reader) Deliveries(ctx context.Context, p store.ListDeliveriesParams) ([]*parley.Delivery, error) {
	return r.st.ListDeliveries(ctx, p)
}

// Backuper returns the store's backups, if it makes its own (SQLite does;
// PostgreSQL does not).
func (r *Reader) Backuper() (store.Backuper, bool) {
	b, ok := r.st.(store.Backuper)
	return b, ok
}

// PageFull reports whether a page of items read with limit and a budget of
// bytes may have more after it: it holds limit items, or the store ended it
// at budget bytes. Such a page says where to continue (its last seq).
func PageFull[T any](items []T, limit, budget int) bool {
	return len(items) > 0 && (len(items) == limit || Size(items) >= budget)
}

// Size is about what items take in JSON, as the store counts a page (an
// event's data; a message row): it errs on the large side, so that a page
// is never mistaken for the last.
func Size[T any](items []T) int {
	n := 0
	for _, it := range items {
		if e, ok := any(it).(parley.Event); ok {
			n += len(e.Data)
			continue
		}
		b, _ := json.Marshal(it)
		n += len(b)
	}
	return n
}
