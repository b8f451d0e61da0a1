// Package store defines the storage interface that every backend (SQLite,
// PostgreSQL) implements, with one params struct per method. The shared
// conformance suite in store/storetest runs the same tests against each.
//
// A store knows nothing of the rules or of HTTP: it persists what the engine
// decided, atomically, and answers reads. The conversation state snapshot is an
// opaque JSON document owned by package conv.
package store

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
)

// Store persists conversations, their event logs and projections, idempotency
// records and tokens. Errors are *parley.Error with the codes named on each
// method; any other error is an internal failure.
type Store interface {
	// CreateConversation writes a new conversation with its first events and
	// state. It returns EBUSY if a conversation with that id exists.
	CreateConversation(ctx context.Context, p CreateConversationParams) error

	// GetConversation returns a conversation with its last seq and state.
	// It returns ENOTFOUND if there is none with that id.
	GetConversation(ctx context.Context, id string) (*ConversationRecord, error)

	// ListConversations pages over conversations, newest first. The returned
	// cursor is "" on the last page.
	ListConversations(ctx context.Context, p ListConversationsParams) ([]*ConversationRecord, string, error)

	// Append atomically appends events, upserts message rows, writes the
	// idempotency record (if any) and replaces the state snapshot. Events must
	// carry seqs ExpectSeq+1, ExpectSeq+2, … It returns ECONFLICT if the
	// conversation's last seq is not ExpectSeq (another writer won), ENOTFOUND
	// if the conversation does not exist, and EBUSY if a message id or
	// idempotency key is already taken. On error nothing is written.
	Append(ctx context.Context, p AppendParams) error

	// ReadEvents returns up to Limit events with seq > After, in seq order.
	// An unknown conversation yields an empty list.
	ReadEvents(ctx context.Context, p ReadEventsParams) ([]parley.Event, error)

	// GetMessage returns one message. It returns ENOTFOUND if the conversation
	// has no message with that id.
	GetMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error)

	// ListMessages returns up to Limit messages with seq > After, in seq order,
	// optionally only those of one turnId and/or one agent; with Latest, the
	// newest Limit messages, still in seq order.
	ListMessages(ctx context.Context, p ListMessagesParams) ([]*parley.Message, error)

	// ListMessagesRaw is ListMessages returning each row as stored: its seq
	// and the message's JSON (what GetMessage decodes), for callers that
	// copy rows without looking inside them (export).
	ListMessagesRaw(ctx context.Context, p ListMessagesParams) ([]RawMessage, error)

	// ListReplies returns up to Limit direct replies to a message with seq >
	// After, in seq order, using the replyTo index.
	ListReplies(ctx context.Context, p ListRepliesParams) ([]*parley.Message, error)

	// Ancestors returns the messages that messageID replies to, transitively,
	// root first and without the message itself. It returns ENOTFOUND if the
	// message does not exist.
	Ancestors(ctx context.Context, conversationID, messageID string) ([]*parley.Message, error)

	// Descendants returns up to Limit messages that reply to messageID,
	// transitively, in seq order, without the message itself.
	Descendants(ctx context.Context, p DescendantsParams) ([]*parley.Message, error)

	// GetIdempotency returns the record of an earlier write with the same
	// (conversation, agent, key). It returns ENOTFOUND if there is none.
	GetIdempotency(ctx context.Context, conversationID, agentID, key string) (*Idempotency, error)

	// CreateToken stores a token (its hash, never its secret). It returns
	// EBUSY if the id or hash exists.
	CreateToken(ctx context.Context, t *parley.Token) error

	// TokenByHash returns the token with that SHA-256 hex hash, revoked or not.
	// It returns ENOTFOUND if there is none.
	TokenByHash(ctx context.Context, hash string) (*parley.Token, error)

	// ListTokens returns every token, oldest first.
	ListTokens(ctx context.Context) ([]*parley.Token, error)

	// RevokeToken marks a token revoked at the given time. It returns
	// ENOTFOUND if there is no token with that id.
	RevokeToken(ctx context.Context, id string, at parley.Time) error

	// CountTokens returns how many tokens are not revoked.
	CountTokens(ctx context.Context) (int, error)

	// DueDeliveries returns up to limit undelivered outbox rows whose next
	// attempt is due at now, oldest first.
	DueDeliveries(ctx context.Context, now parley.Time, limit int) ([]*parley.Delivery, error)

	// CreateTask stores a scheduled task. It returns EBUSY if the id exists.
	CreateTask(ctx context.Context, t *parley.Task) error

	// GetTask returns a task. It returns ENOTFOUND.
	GetTask(ctx context.Context, id string) (*parley.Task, error)

	// ListTasks returns every task, oldest first.
	ListTasks(ctx context.Context) ([]*parley.Task, error)

	// DeleteTask removes a task. It returns ENOTFOUND.
	DeleteTask(ctx context.Context, id string) error

	// DueTasks returns up to limit tasks whose next run is due at now.
	DueTasks(ctx context.Context, now parley.Time, limit int) ([]*parley.Task, error)

	// DeleteConversation removes a conversation with its events, messages,
	// idempotency records, outbox rows and tasks, in one transaction. It
	// returns ENOTFOUND if there is none with that id. Only a failed import
	// uses it: a conversation's log is otherwise append-only.
	DeleteConversation(ctx context.Context, id string) error

	// UpdateDelivery records an attempt: delivered (DeliveredAt set) or not
	// (Attempts, NextAttemptAt, LastError). It returns ENOTFOUND.
	UpdateDelivery(ctx context.Context, d *parley.Delivery) error

	// Close releases the store's resources after in-flight writes finish.
	Close() error
}

// ConversationRecord is a stored conversation with its log head.
type ConversationRecord struct {
	Conversation parley.Conversation
	LastSeq      int64
	// State is the JSON state snapshot as of LastSeq, owned by package conv.
	State []byte
}

// CreateConversationParams are the arguments of Store.CreateConversation.
type CreateConversationParams struct {
	Conversation parley.Conversation
	// Events are the first events, with seqs 1, 2, …
	Events []parley.Event
	State  []byte
}

// ListConversationsParams are the arguments of Store.ListConversations.
type ListConversationsParams struct {
	// Cursor is "" for the first page, else the cursor a previous page returned.
	Cursor string
	Limit  int
}

// AppendParams are the arguments of Store.Append.
type AppendParams struct {
	ConversationID string
	ExpectSeq      int64
	Events         []parley.Event
	// Messages are inserted, or replace the row with the same id.
	Messages []*parley.Message
	// RemoveMessages are the ids of message rows to delete (a revert).
	RemoveMessages []string
	// Deliveries are outbox rows to write (channel auto-replies).
	Deliveries []*parley.Delivery
	// Task, if set, advances a scheduled task with the firing's events; the
	// append fails with ECONFLICT if the task no longer runs at Task.From.
	Task        *parley.TaskAdvance
	Idempotency *Idempotency
	State       []byte
}

// ReadEventsParams are the arguments of Store.ReadEvents.
type ReadEventsParams struct {
	ConversationID string
	After          int64
	Limit          int
}

// ListMessagesParams are the arguments of Store.ListMessages.
type ListMessagesParams struct {
	ConversationID string
	After          int64
	Limit          int
	TurnID         string
	AgentID        string
	// Latest, when true, returns the newest Limit messages (still oldest
	// first) instead of the first Limit after After.
	Latest bool
}

// RawMessage is a stored message row: its seq and the message as JSON.
type RawMessage struct {
	Seq  int64
	Data []byte
}

// ListRepliesParams are the arguments of Store.ListReplies.
type ListRepliesParams struct {
	ConversationID string
	MessageID      string
	After          int64
	Limit          int
}

// DescendantsParams are the arguments of Store.Descendants.
type DescendantsParams struct {
	ConversationID string
	MessageID      string
	Limit          int
}

// Idempotency records the result of a write made with a client request id, so
// that a retry returns the original result.
type Idempotency struct {
	ConversationID string
	AgentID        string
	Key            string
	// RequestHash is a hash of the request body; a retry with another body is refused.
	RequestHash string
	// Seq is the seq of the first event the write appended.
	Seq int64
	// Response is the JSON result returned to the original request.
	Response []byte
	Time     parley.Time
}

// CheckDense returns EINVALID unless the events' seqs are after+1, after+2, …
// Every backend checks this before it writes.
func CheckDense(events []parley.Event, after int64) error {
	for i, e := range events {
		if want := after + int64(i) + 1; e.Seq != want {
			return parley.Errorf(parley.EINVALID, "event %d has seq %d, want %d: seqs must be dense", i, e.Seq, want)
		}
	}
	return nil
}

// DecodeMessages decodes raw rows, for backends that implement ListMessages
// with ListMessagesRaw.
func DecodeMessages(raw []RawMessage) ([]*parley.Message, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make([]*parley.Message, 0, len(raw))
	for _, r := range raw {
		m := &parley.Message{}
		if err := json.Unmarshal(r.Data, m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
