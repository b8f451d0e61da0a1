// Package store defines the storage interface that every backend (SQLite,
// PostgreSQL) implements, with one params struct per method. The shared
// conformance suite in store/storetest runs the same tests against each.
//
// A store knows nothing of the rules or of HTTP: it persists what the engine
// decided, atomically, and answers reads. The conversation state snapshot and
// its prompt queue, kept apart, are opaque JSON documents owned by package
// conv.
package store

import (
	"context"

	"github.com/parleyhq/parley"
)

// Store persists conversations, their event logs and projections, idempotency
// records and tokens. Errors are *parley.Error with the codes named on each
// method; any other error is an internal failure.
type Store interface {
	// CreateConversation writes a new conversation with its first events and
	// state; with Import set, as an import in progress (see ImportLease). It
	// returns EBUSY if a conversation with that id exists, saying so when it
	// is an import in progress.
	CreateConversation(ctx context.Context, p CreateConversationParams) error

	// Reader's reads see what is committed at each call.
	Reader

	// ReadSnapshot calls fn with a Reader of the store as it is at one
	// moment, the call's: every read fn makes through it sees what was
	// committed then and nothing committed after, however long fn takes,
	// and no writer waits for it (a read transaction: on SQLite a reader
	// of the write-ahead log, on PostgreSQL a REPEATABLE READ READ ONLY
	// one). Keep fn short: until it returns it holds one of the store's
	// connections, and on SQLite the log cannot be checkpointed past that
	// moment. Use the Reader from one goroutine, and not after fn returns.
	ReadSnapshot(ctx context.Context, fn func(Reader) error) error

	// Head returns the seq of a conversation's last event and its epoch: a
	// cheap check of whether a cached state is current, and still of the
	// same conversation (one deleted and made again under the same id has
	// another epoch). It returns ENOTFOUND as GetConversation does.
	Head(ctx context.Context, id string) (Head, error)
	// Heads returns the Head of each of the conversations named (at most
	// MaxHeads) in one read; an unknown one, or an import in progress, is
	// left out of the map.
	Heads(ctx context.Context, ids []string) (map[string]Head, error)

	// ListConversations pages over conversations by last activity, most
	// recent first, ties by id (the greater first), leaving out imports in
	// progress. A conversation's last activity is the time of its latest
	// event; it never moves back (an event stamped before it, by a clock
	// set back, leaves it). The returned cursor, "" on the last page, is
	// the (last activity, id) of the page's last row, so a walk (the first
	// page, then each next cursor) lists each conversation that exists
	// and gets no event during the walk exactly once, in order; one that
	// gets an event moves above the cursor, so the walk lists it at most
	// once (not at all if it had not reached it), and the move never
	// makes it skip or repeat another. A new walk lists it first.
	ListConversations(ctx context.Context, p ListConversationsParams) ([]*ConversationRecord, string, error)

	// Append atomically appends events, takes the names of the messages
	// and prompts they make, upserts message rows, writes the
	// idempotency record (if any) and replaces the state snapshot (and the
	// prompt queue, if given). Events must carry seqs ExpectSeq+1,
	// ExpectSeq+2, …; there may be none (a task's skipped firing only
	// advances the task). It returns ECONFLICT if the
	// conversation's last seq is not ExpectSeq (another writer won), ENOTFOUND
	// if the conversation does not exist (or is an import in progress and
	// Import is nil), and EBUSY if a name or idempotency key is already
	// taken. With Import set, the append is a batch of that import: it renews
	// the import's lease, and returns EBUSY (see ErrImportLost) unless the
	// conversation is an import in progress of Import.Owner. On error nothing
	// is written.
	Append(ctx context.Context, p AppendParams) error
	// AppendAsync is Append without waiting for it: done is called with
	// what Append would return, once the append is committed or refused.
	// done must not block; it may be called on a goroutine of the store's.
	AppendAsync(p AppendParams, done func(error))
	// Exclusive calls fn holding conversation id's append lock: until fn
	// returns, no other writer, on any node, appends to it. The append fn
	// makes with the write it is given (at most one) commits when fn
	// returns nil, and is undone if fn fails. It is the last resort of a
	// writer that other nodes keep overtaking. ENOTFOUND if there is no
	// such conversation.
	Exclusive(ctx context.Context, id string, fn func(write func(AppendParams) error) error) error

	// RenewImport moves the end of an import's lease to p.Lease.Expires. It
	// returns EBUSY (ErrImportLost) unless the conversation is an import in
	// progress of p.Lease.Owner.
	RenewImport(ctx context.Context, p RenewImportParams) error

	// FinishImport ends an import: the conversation becomes an ordinary one,
	// visible to readers and open to every writer. It returns EBUSY
	// (ErrImportLost) unless the conversation is an import in progress of
	// owner.
	FinishImport(ctx context.Context, conversationID, owner string) error

	// AbortImport removes an import in progress of owner with everything it
	// wrote, in one transaction. It returns ENOTFOUND if there is no such
	// import (it finished, or was swept).
	AbortImport(ctx context.Context, conversationID, owner string) error

	// SweepImports removes imports in progress whose importer is gone, each
	// with everything it wrote in one transaction, and returns their ids.
	// Which importers are gone is the backend's rule: a store that one
	// process owns (SQLite) removes every import of another owner and every
	// import whose lease ended by p.Now; a store that several processes may
	// share (PostgreSQL) removes only those whose lease ended by p.Now.
	SweepImports(ctx context.Context, p SweepImportsParams) ([]string, error)

	// MessageKey returns what the store keeps of a message beside its row
	// (MessageKey), without reading the row: a look-up of a message whose
	// text is not wanted costs the same however large the message. It
	// returns ENOTFOUND if the conversation has no message with that id.
	MessageKey(ctx context.Context, conversationID, messageID string) (*MessageKey, error)

	// ListMessageKeys is ListMessages returning each message's key
	// (MessageKey), read without its row; MaxBytes is not needed.
	ListMessageKeys(ctx context.Context, p ListMessagesParams) ([]MessageKey, error)

	// ListReplies returns up to Limit direct replies to a message with seq >
	// After, in seq order, using the replyTo index.
	ListReplies(ctx context.Context, p ListRepliesParams) ([]*parley.Message, error)

	// Ancestors returns the messages that p.MessageID replies to,
	// transitively, root first and without the message itself: the nearest
	// p.Limit of them, within the bounds of p (see ThreadParams). It
	// returns ENOTFOUND if the message does not exist.
	Ancestors(ctx context.Context, p ThreadParams) ([]*parley.Message, error)

	// Descendants returns up to p.Limit messages that reply to p.MessageID,
	// transitively, with seq > p.After, in seq order, without the message
	// itself, within p.MaxBytes (see ThreadParams). It returns ENOTFOUND
	// if the message does not exist.
	Descendants(ctx context.Context, p ThreadParams) ([]*parley.Message, error)

	// Search returns the messages whose text has every term of p.Query,
	// best first (by the backend's rank, then newest first), p.Limit of
	// them after the first p.Offset: in every conversation but imports in
	// progress, or in p.ConversationID's, or in p.Member's. A message is
	// found once it has ended (a streamed message once it is finalized),
	// by the first SearchIndexedChars of its text, and is gone from the
	// search with its row (a revert, a deleted conversation). Of the
	// messages that match, the newest SearchCandidates are ranked. A
	// query without terms finds nothing.
	Search(ctx context.Context, p SearchParams) ([]parley.SearchHit, error)

	// IDTaken reports whether id names a message or prompt of the
	// conversation, or once did: an id an append took (AppendParams.Names)
	// stays taken until the conversation is deleted.
	IDTaken(ctx context.Context, conversationID, id string) (bool, error)

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

	// TakeDeliveries leases up to p.Limit undelivered outbox rows whose
	// next attempt is due at p.Now, oldest first, until p.Until: no call
	// takes them again before then, so that of several nodes polling one
	// database one delivers each row (rows another call holds are skipped,
	// not waited for). A node that dies holding rows leaves them to be
	// taken again once their lease ends. The rows returned have
	// NextAttemptAt = p.Until; UpdateDelivery records what became of them.
	TakeDeliveries(ctx context.Context, p TakeDeliveriesParams) ([]*parley.Delivery, error)

	// CreateTask stores a scheduled task. It returns EBUSY if the id exists,
	// or if the task's agent has p.MaxPerAgent tasks already (0: no bound);
	// the count and the insert are one step, so that racing creations cannot
	// pass the bound together.
	CreateTask(ctx context.Context, p CreateTaskParams) error

	// GetTask returns a task. It returns ENOTFOUND.
	GetTask(ctx context.Context, id string) (*parley.Task, error)

	// ListTasks returns every task, oldest first.
	ListTasks(ctx context.Context) ([]*parley.Task, error)

	// DeleteTask removes a task. It returns ENOTFOUND.
	DeleteTask(ctx context.Context, id string) error

	// TakeDueTasks takes the tasks of one round of the scheduler and
	// leases them until p.Until: those due at p.Now and not leased then,
	// longest overdue first, at most p.PerAgent of one agent and then
	// p.PerConversation of one conversation (0: no bound), p.Limit in all.
	// However many tasks one agent or conversation has, a task of another
	// comes in the next round it is due, or soon after when more than
	// p.Limit agents and conversations have tasks overdue. Of several
	// nodes taking at once, each task goes to one (rows another take holds
	// are skipped, not waited for). The append that advances a task
	// (AppendParams.Task) ends its lease; a node that dies holding tasks
	// leaves them to be taken again once their lease ends.
	TakeDueTasks(ctx context.Context, p TakeDueTasksParams) ([]*parley.Task, error)

	// DeleteConversation removes a conversation with its events, messages,
	// idempotency records, outbox rows, tasks and prompt queue, in one
	// transaction: an admin's DELETE. It returns ENOTFOUND if
	// there is none with that id. A conversation's log is otherwise
	// append-only.
	DeleteConversation(ctx context.Context, id string) error

	// RenewRunners records the runners attached on one node (p.Node) as
	// present until p.Until, replacing what that node recorded before: a
	// runner it no longer lists is gone at once. A node renews its record
	// well within the lease while it runs; one that dies leaves its runners
	// to lapse when the lease ends.
	RenewRunners(ctx context.Context, p RenewRunnersParams) error

	// LiveRunners returns the runners whose lease is live at p.Now, of one
	// conversation (p.ConversationID: its own and the agent-wide ones) or
	// of all, by conversation, agent and node.
	LiveRunners(ctx context.Context, p LiveRunnersParams) ([]RunnerLease, error)

	// QueuedFor pages over the conversations that p.AgentID takes part in
	// and whose prompt queue is not empty, by id after p.After: what an
	// agent-wide runner that has just connected may have to answer.
	QueuedFor(ctx context.Context, p QueuedForParams) ([]string, error)

	// UpdateDelivery records an attempt: delivered (DeliveredAt set), given
	// up (Status failed, GaveUpAt set) or to be tried again (Attempts,
	// NextAttemptAt, LastError). A delivered or given-up row is done: no
	// TakeDeliveries takes it again. It returns ENOTFOUND.
	UpdateDelivery(ctx context.Context, d *parley.Delivery) error

	// ListDeliveries pages over the outbox rows of one status (p.Status,
	// or all when it is empty) by id after p.After: at most p.Limit
	// (clamped to the backend's bound), ending after the row that brings
	// their content to p.MaxBytes (0: no bound). A row written before
	// rows had a status reads as pending or delivered.
	ListDeliveries(ctx context.Context, p ListDeliveriesParams) ([]*parley.Delivery, error)

	// PruneDeliveries removes up to p.Limit rows that were done (delivered
	// or given up) before p.Before, and says how many it removed, so that
	// the outbox keeps what is done for a bounded time.
	PruneDeliveries(ctx context.Context, p PruneDeliveriesParams) (int, error)

	// CompactionCursors pages over the conversations (not imports in
	// progress) in id order after p.After, with where compaction of each
	// stands (see compact.go).
	CompactionCursors(ctx context.Context, p CompactionCursorsParams) ([]CompactionCursor, error)

	// Compact looks at up to p.MaxRows stored rows of a conversation's log
	// after its compaction cursor, replaces the runs PlanCompaction finds
	// with spans, and moves the cursor, in one transaction. Reads of the
	// log stay exact across it: ReadEvents returns a tombstone for each seq
	// compacted. It returns ENOTFOUND for an unknown conversation (or an
	// import in progress) and EBUSY (ErrCompactionRaced) when the rows
	// changed under it; several nodes may run it at once.
	Compact(ctx context.Context, p CompactParams) (CompactResult, error)

	// RenewEpochs gives every conversation a new epoch (in its record and
	// in its conversation.created event), in one transaction, and returns
	// how many it renewed: after a restore, so that a client holding a
	// position of the history it replaced reloads. Run it with no server
	// on the store.
	RenewEpochs(ctx context.Context, p RenewEpochsParams) (int, error)

	// Close releases the store's resources after in-flight writes finish.
	Close() error
}

// Reader reads a conversation, its log and its message rows: what an
// export reads, at one moment (Store.ReadSnapshot).
type Reader interface {
	// GetConversation returns a conversation with its last seq, state and
	// prompt queue.
	// It returns ENOTFOUND if there is none with that id, or if it is an
	// import in progress.
	GetConversation(ctx context.Context, id string) (*ConversationRecord, error)

	// ReadEvents returns up to Limit events with seq > After, in seq order;
	// with MaxBytes, it stops after the event that brings the events' data
	// to MaxBytes or more (so it returns at least one event, if there is
	// one). An unknown conversation yields an empty list.
	ReadEvents(ctx context.Context, p ReadEventsParams) ([]parley.Event, error)

	// GetMessage returns one message. It returns ENOTFOUND if the conversation
	// has no message with that id.
	GetMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error)

	// ListMessages returns up to Limit messages with seq > After, in seq order,
	// optionally only those of one turnId and/or one agent; with Latest, the
	// newest Limit messages, still in seq order.
	ListMessages(ctx context.Context, p ListMessagesParams) ([]*parley.Message, error)

	// ListMessagesRaw is ListMessages returning each row as stored: its seq
	// and its stored form (EncodeRow), for callers that look at rows
	// without decoding them whole (a snapshot summarizes large ones with
	// ReadRowHead; export copies them with WireRow, which gives the JSON
	// clients read).
	ListMessagesRaw(ctx context.Context, p ListMessagesParams) ([]RawMessage, error)
}
