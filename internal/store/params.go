package store

// The records the stores keep, and the arguments of each method of Store
// (one params struct per method), with the helpers of their bounds.

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley"
)

// Head is where a conversation's log ends, and which conversation of its
// id it is: its epoch, which a conversation deleted and made again under
// the same id, or restored, does not share.
type Head struct {
	Seq   int64
	Epoch string
}

// ConversationRecord is a stored conversation with its log head.
type ConversationRecord struct {
	Conversation parley.Conversation
	LastSeq      int64
	// State is the JSON state snapshot as of LastSeq, owned by package conv.
	State []byte
	// Queue is the prompt queue as of LastSeq (JSON owned by package conv):
	// the last one a CreateConversation or Append wrote, or nil if none did.
	Queue []byte
}

// CreateConversationParams are the arguments of Store.CreateConversation.
type CreateConversationParams struct {
	Conversation parley.Conversation
	// Members are the agents that take part (the rules say who): the
	// conversation is listed for each of them (ListConversationsParams.Member).
	Members []string
	// Events are the first events, with seqs 1, 2, …
	Events []parley.Event
	State  []byte
	// Queue, if not nil, is the conversation's first prompt queue.
	Queue []byte
	// Import, if set, creates the conversation as an import in progress.
	Import *ImportLease
}

// ImportLease marks a conversation as an import in progress: it is invisible
// to readers (GetConversation, ListConversations) and to every writer but
// its importer until FinishImport, and SweepImports removes it once its
// importer is gone. The importer renews the lease as it goes.
type ImportLease struct {
	// Owner identifies the importing process: a random id per engine.
	Owner string
	// Expires is when the import counts as abandoned unless renewed.
	Expires parley.Time
}

// RenewImportParams are the arguments of Store.RenewImport.
type RenewImportParams struct {
	ConversationID string
	Lease          ImportLease
}

// SweepImportsParams are the arguments of Store.SweepImports.
type SweepImportsParams struct {
	// Owner is the sweeping process's owner id.
	Owner string
	// Now is the time a lease must have ended by to count as expired.
	Now parley.Time
	// ConversationID, if set, limits the sweep to that one conversation.
	ConversationID string
	// Limit bounds the imports removed by one call (default 100).
	Limit int
}

// Bound returns the Limit to apply: 100 unless Limit is positive.
func (p SweepImportsParams) Bound() int {
	if p.Limit <= 0 {
		return 100
	}
	return p.Limit
}

// ListConversationsParams are the arguments of Store.ListConversations.
type ListConversationsParams struct {
	// Cursor is "" for the first page, else the cursor a previous page returned.
	Cursor string
	Limit  int
	// Member, if set, lists only the conversations this agent is one of the
	// members of (CreateConversationParams.Members).
	Member string
	// Title, if set, lists only the conversations whose title contains it,
	// ignoring the case of ASCII letters (%, _ and \ are plain characters).
	Title string
	// Participant, if set, lists only the conversations whose stored
	// record has it among its participants.
	Participant string
	// Involves, if set, lists only the conversations the agent takes part
	// in as their stored record has it: a participant, a member or the
	// conversation's creator.
	Involves string
	// Metadata, if set, lists only the conversations whose stored
	// metadata has each key at the top level with exactly that string
	// value (see CheckListFilters for the bounds).
	Metadata []MetadataFilter
	// MaxBytes, if set, ends the page (with a cursor) after the
	// conversation that brings what was read of them (record, state and
	// queue) to MaxBytes, so that a page of conversations with long
	// queues is not held whole in memory.
	MaxBytes int
}

// MetadataFilter is one metadata condition of a list: the top-level key
// Key holds the JSON string Value.
type MetadataFilter struct {
	Key, Value string
}

// Bounds of a list's filters.
const (
	// MaxMetadataFilters is how many metadata conditions a list may have.
	MaxMetadataFilters = 4
	// MaxMetadataKey is the longest metadata key a list may filter by, in bytes.
	MaxMetadataKey = 128
	// MaxFilterValue is the longest metadata value or agent id a list
	// may filter by, in bytes.
	MaxFilterValue = 512
)

// CheckListFilters refuses, with EINVALIDVALUE, the filters of p a list
// does not take: more than MaxMetadataFilters metadata conditions, an
// empty or too long key, a value or agent id that is too long, or one
// that is not valid UTF-8 or holds a NUL.
func CheckListFilters(p ListConversationsParams) error {
	if len(p.Metadata) > MaxMetadataFilters {
		return parley.Errorf(parley.EINVALIDVALUE, "%d metadata filters; at most %d", len(p.Metadata), MaxMetadataFilters)
	}
	check := func(what, v string, max int) error {
		switch {
		case len(v) > max:
			return parley.Errorf(parley.EINVALIDVALUE, "%s is %d bytes; at most %d", what, len(v), max)
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			return parley.Errorf(parley.EINVALIDVALUE, "%s is not valid UTF-8 text without NUL", what)
		}
		return nil
	}
	if err := check("participant filter", p.Participant, MaxFilterValue); err != nil {
		return err
	}
	if err := check("involves filter", p.Involves, MaxFilterValue); err != nil {
		return err
	}
	for _, m := range p.Metadata {
		if m.Key == "" {
			return parley.Errorf(parley.EINVALIDVALUE, "a metadata filter needs a key: metadata.<key>=<value>")
		}
		if err := check("metadata filter key", m.Key, MaxMetadataKey); err != nil {
			return err
		}
		if err := check("metadata filter value of "+m.Key, m.Value, MaxFilterValue); err != nil {
			return err
		}
	}
	return nil
}

// PageFull reports whether a page of n items, or of size bytes, is full:
// n reached limit, or size reached maxBytes (when set).
func PageFull(n, limit, size, maxBytes int) bool {
	return n >= limit || maxBytes > 0 && size >= maxBytes
}

// AppendParams are the arguments of Store.Append.
type AppendParams struct {
	ConversationID string
	ExpectSeq      int64
	// Epoch, if set, is the epoch of the conversation the append was
	// decided for: it fails with ECONFLICT if the conversation of that id
	// now has another (it was deleted and made again), even at ExpectSeq.
	Epoch  string
	Events []parley.Event
	// Names are the ids of messages and prompts the append takes (see
	// conv.Names): it fails with EBUSY (ErrIDTaken) if one is taken
	// already, so that no write takes the id of another's message or
	// prompt, even one removed since.
	Names []string
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
	// State, if not nil, replaces the conversation's state snapshot (JSON
	// owned by package conv, as of the append's last seq); nil leaves the
	// stored one, which is then older than the log's head: readers fold
	// the events after it (ConversationRecord.State says as of which).
	State []byte
	// Queue, if not nil, replaces the conversation's prompt queue; nil
	// leaves it as it is. It is kept apart from State so that the appends
	// that do not change the queue (text deltas, messages, claims: all but
	// the prompt events) cost the same whatever it holds.
	Queue []byte
	// Import, if set, makes the append a batch of the import of
	// Import.Owner, whose lease it renews to Import.Expires.
	Import *ImportLease
	// Conversation, if set, rewrites the conversation's stored record and
	// the agents it is listed for with the append's events (a
	// conversation.updated event among them).
	Conversation *ConversationChange
	// Committed, if set, is called once the append is committed and every
	// reader sees it, which may be before it is durable: a store that
	// syncs its log apart from its commits (SQLite with synchronous full)
	// calls it before the append's outcome, which waits for the sync. A
	// store whose commit is its sync may not call it at all: the outcome
	// then says both. It is not called for an append that fails to
	// commit, must not block, and may run on a goroutine of the store's.
	Committed func()
}

// ConversationChange is a conversation's record after a change
// (AppendParams.Conversation).
type ConversationChange struct {
	// Conversation replaces the stored record; its id and epoch are the
	// append's conversation's, and its creation time stays as it was.
	Conversation parley.Conversation
	// Members replace the agents the conversation is listed for
	// (CreateConversationParams.Members).
	Members []string
}

// ReadEventsParams are the arguments of Store.ReadEvents.
type ReadEventsParams struct {
	ConversationID string
	After          int64
	Limit          int
	// MaxBytes, if set, bounds a page by the size of its events' data, so
	// that a page of large events is not held whole in memory.
	MaxBytes int
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
	// Before, if set, keeps only messages with seq < Before: with Latest,
	// pages back from the newest.
	Before int64
	// MaxBytes, if set (and not with Latest), ends the page after the row
	// that brings the rows' stored size to it, so that a page of large
	// messages is not held whole in memory.
	MaxBytes int
}

// MessageKey is what the store keeps of a message beside its row, in
// columns of their own: where it stands, who wrote it and what it
// answers.
type MessageKey struct {
	ID      string
	Seq     int64
	TurnID  string
	AgentID string
	ReplyTo string
	Depth   int
}

// RawMessage is a stored message row: its seq and its stored form (see
// EncodeRow).
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
	// MaxBytes bounds the page by the rows' stored size, as for ListMessages.
	MaxBytes int
}

// CreateTaskParams are the arguments of Store.CreateTask.
type CreateTaskParams struct {
	Task        *parley.Task
	MaxPerAgent int
}

// RunnerLease is one node's record that a runner of an agent is attached
// to a conversation there (or, with ConversationID AllConversations, to
// every conversation the agent takes part in).
type RunnerLease struct {
	Node           string
	ConversationID string
	AgentID        string
}

// AllConversations is the ConversationID of an agent-wide runner's lease.
const AllConversations = "*"

// QueuedForParams are the arguments of Store.QueuedFor.
type QueuedForParams struct {
	AgentID string
	After   string // a conversation id; "" for the first page
	Limit   int
}

// RenewRunnersParams are the arguments of Store.RenewRunners.
type RenewRunnersParams struct {
	Node string
	// Runners are the node's attached runners (Node fields are ignored),
	// each once.
	Runners []RunnerLease
	Until   parley.Time
}

// LiveRunnersParams are the arguments of Store.LiveRunners.
type LiveRunnersParams struct {
	// ConversationID narrows the answer to one conversation ("": all).
	ConversationID string
	Now            parley.Time
}

// TakeDeliveriesParams are the arguments of Store.TakeDeliveries.
type TakeDeliveriesParams struct {
	Now   parley.Time
	Until parley.Time
	Limit int
}

// ListDeliveriesParams are the arguments of Store.ListDeliveries.
type ListDeliveriesParams struct {
	Status   parley.DeliveryStatus
	After    string
	Limit    int
	MaxBytes int
}

// PruneDeliveriesParams are the arguments of Store.PruneDeliveries.
type PruneDeliveriesParams struct {
	Before parley.Time
	Limit  int
}

// TakeDueTasksParams are the arguments of Store.TakeDueTasks.
type TakeDueTasksParams struct {
	Now parley.Time
	// Until is when the lease of the tasks taken ends (at or before Now:
	// there is none).
	Until           parley.Time
	Limit           int
	PerAgent        int
	PerConversation int
}

// SortTasks puts tasks in the order a round fires them: longest overdue
// first (by NextRunAt, then id).
func SortTasks(ts []*parley.Task) {
	slices.SortFunc(ts, func(a, b *parley.Task) int {
		if c := a.NextRunAt.Compare(b.NextRunAt.Time); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// TooManyTasks is the EBUSY of a task whose agent has max tasks already.
func TooManyTasks(agentID string, max int) error {
	return parley.Errorf(parley.EBUSY, "agent %s has %d scheduled tasks, the most it may have: delete one first", agentID, max)
}

// NoBound stands for a bound of 0 (none) in a query that needs a number.
func NoBound(n int) int {
	if n <= 0 {
		return math.MaxInt32
	}
	return n
}
