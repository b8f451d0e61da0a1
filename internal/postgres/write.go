package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// CreateConversation implements store.Store.
func (db *DB) CreateConversation(ctx context.Context, p store.CreateConversationParams) error {
	if err := store.CheckDense(p.Events, 0); err != nil {
		return err
	}
	if err := store.CheckConversation(p); err != nil {
		return err
	}
	if err := store.CheckLease(p.Import); err != nil {
		return err
	}
	data, err := json.Marshal(p.Conversation)
	if err != nil {
		return err
	}
	var owner, expires any // NULL: an ordinary conversation
	if p.Import != nil {
		owner, expires = p.Import.Owner, p.Import.Expires.Time
	}
	return db.tx(ctx, func(tx pgx.Tx) error {
		at := p.Conversation.CreatedAt.Time
		if t := lastAt(p.Events); t != nil {
			at = *t
		}
		tag, err := tx.Exec(ctx, `INSERT INTO conversations (id, created_at, data, last_seq, state, import_owner, import_expires, epoch, last_event_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
			p.Conversation.ID, p.Conversation.CreatedAt.Time, data, int64(len(p.Events)), p.State, owner, expires, p.Conversation.Epoch, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var importing bool
			if err := tx.QueryRow(ctx, `SELECT import_owner IS NOT NULL FROM conversations WHERE id = $1`, p.Conversation.ID).Scan(&importing); err != nil {
				return err
			}
			return store.ErrTaken(p.Conversation.ID, importing)
		}
		for _, m := range p.Members {
			if _, err := tx.Exec(ctx, `INSERT INTO conversation_members (agent_id, created_at, conversation_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				m, p.Conversation.CreatedAt.Time, p.Conversation.ID); err != nil {
				return err
			}
		}
		if p.Queue != nil {
			if _, err := tx.Exec(ctx, upsertQueue, p.Conversation.ID, p.Queue); err != nil {
				return err
			}
		}
		return insertEvents(ctx, tx, p.Conversation.ID, p.Events, store.AppendRows{})
	})
}

// Append implements store.Store. Appends of many conversations are
// committed together (see committer); an import's batches and a task's
// firing commit alone.
func (db *DB) Append(ctx context.Context, p store.AppendParams) error {
	if err := store.CheckDense(p.Events, p.ExpectSeq); err != nil {
		return err
	}
	if err := store.CheckLease(p.Import); err != nil {
		return err
	}
	if p.Import != nil || p.Task != nil || p.Conversation != nil {
		return db.appendOne(ctx, p)
	}
	return db.group.append(ctx, &p)
}

// AppendAsync implements store.Store: Append on a goroutine of its own.
func (db *DB) AppendAsync(p store.AppendParams, done func(error)) {
	go func() { done(db.Append(context.Background(), p)) }()
}

// appendOne commits one append in a transaction of its own. The
// conditional UPDATE takes the conversation's row lock until commit, so
// appends to one conversation commit in seq order; a writer that read an
// older seq matches no row.
func (db *DB) appendOne(ctx context.Context, p store.AppendParams) error {
	return db.tx(ctx, func(tx pgx.Tx) error { return appendTx(ctx, tx, p) })
}

// Exclusive implements store.Store: fn runs in a transaction that holds
// the conversation's row lock, which every append takes.
func (db *DB) Exclusive(ctx context.Context, id string, fn func(write func(store.AppendParams) error) error) error {
	return db.tx(ctx, func(tx pgx.Tx) error {
		var seq int64
		err := tx.QueryRow(ctx, `SELECT last_seq FROM conversations WHERE id = $1 AND import_owner IS NULL FOR UPDATE`, id).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
		}
		if err != nil {
			return err
		}
		return fn(store.OnceFor(id, func(p store.AppendParams) error { return appendTx(ctx, tx, p) }))
	})
}

// appendTx makes the append p in tx.
func appendTx(ctx context.Context, tx pgx.Tx, p store.AppendParams) error {
	last := p.ExpectSeq + int64(len(p.Events))
	var tag pgconn.CommandTag
	var err error
	if im := p.Import; im != nil {
		tag, err = tx.Exec(ctx, `UPDATE conversations SET last_seq = $1, state = COALESCE($2, state), import_expires = $3,
			last_event_at = GREATEST(last_event_at, $7) WHERE id = $4 AND last_seq = $5 AND import_owner = $6`,
			last, p.State, im.Expires.Time, p.ConversationID, p.ExpectSeq, im.Owner, lastAt(p.Events))
	} else {
		tag, err = tx.Exec(ctx, bumpConversation, last, p.State, p.ConversationID, p.ExpectSeq, p.Epoch, lastAt(p.Events))
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		var head store.Head
		var owner *string
		err := tx.QueryRow(ctx, `SELECT last_seq, epoch, import_owner FROM conversations WHERE id = $1`, p.ConversationID).Scan(&head.Seq, &head.Epoch, &owner)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if owner == nil {
			owner = new(string)
		}
		return store.AppendMiss(p, err == nil, head, *owner)
	}
	enc, err := store.EncodeAppend(&p)
	if err != nil {
		return err
	}
	if err := insertEvents(ctx, tx, p.ConversationID, p.Events, enc); err != nil {
		return err
	}
	if err := changeConversation(ctx, tx, p.Conversation); err != nil {
		return err
	}
	if p.Task != nil {
		if err := advanceTask(ctx, tx, p.Task); err != nil {
			return err
		}
	}
	if len(p.RemoveMessages) > 0 {
		if err := unrefRows(ctx, tx, p.ConversationID, p.RemoveMessages); err != nil {
			return err
		}
	}
	batch := &pgx.Batch{}
	if err := queueRows(batch, &p, enc); err != nil {
		return err
	}
	queueNotify(batch, []string{notice(p.ConversationID, last, p.Queue != nil)})
	return uniqueTaken(tx.SendBatch(ctx, batch).Close(), &p)
}

// changeConversation rewrites a conversation's record and the agents it
// is listed for, if ch is set (store.AppendParams.Conversation). Its
// members' rows keep the conversation's creation time.
func changeConversation(ctx context.Context, tx pgx.Tx, ch *store.ConversationChange) error {
	if ch == nil {
		return nil
	}
	data, err := json.Marshal(ch.Conversation)
	if err != nil {
		return err
	}
	members := ch.Members
	if members == nil {
		members = []string{}
	}
	id := ch.Conversation.ID
	if _, err := tx.Exec(ctx, `UPDATE conversations SET data = $1 WHERE id = $2`, data, id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM conversation_members WHERE conversation_id = $1 AND NOT (agent_id = ANY($2::text[]))`, id, members); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO conversation_members (agent_id, created_at, conversation_id)
		SELECT m, c.created_at, c.id FROM conversations c, unnest($2::text[]) m WHERE c.id = $1 ON CONFLICT DO NOTHING`, id, members)
	return err
}

// uniqueTaken turns the unique violation of an append's rows into the
// EBUSY a client can act on: a name (an id) or an idempotency key that is
// taken. Any other error is returned as it is.
func uniqueTaken(err error, p *store.AppendParams) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		return err
	}
	switch {
	case pe.TableName == "names":
		for _, n := range p.Names {
			if strings.Contains(pe.Detail, "("+p.ConversationID+", "+n+")") {
				return store.ErrIDTaken(n)
			}
		}
		if len(p.Names) == 1 {
			return store.ErrIDTaken(p.Names[0])
		}
		return parley.Errorf(parley.EBUSY, "an id of this append already names a message or prompt of conversation %s (ids are never reused, even once removed)", p.ConversationID)
	case pe.TableName == "idempotency" && p.Idempotency != nil:
		return parley.Errorf(parley.EBUSY, "client request id %q was already used", p.Idempotency.Key)
	}
	return err
}

// bumpConversation moves an ordinary conversation's last seq from $4 to
// $1 and replaces its state with $2 (unless it is NULL); it matches no row
// if another writer moved it first, or if its epoch is not $5 (unless $5
// is ”): the conversation was deleted and made again. It moves the last
// activity to $6 (the time of the append's last event; NULL for none),
// never back (see store.Store.ListConversations).
const bumpConversation = `UPDATE conversations SET last_seq = $1, state = COALESCE($2, state), last_event_at = GREATEST(last_event_at, $6)
	WHERE id = $3 AND last_seq = $4 AND import_owner IS NULL AND ($5 = '' OR epoch = $5)`

// lastAt is the last activity events bring: the time of the last, or
// nil (SQL NULL) if there are none.
func lastAt(events []parley.Event) *time.Time {
	if len(events) == 0 {
		return nil
	}
	t := events[len(events)-1].Time.Time
	return &t
}

// queueRows queues the rows an append writes beside its events: the prompt
// queue, message rows (enc.Rows), outbox deliveries and the idempotency
// record. A revert's rows are removed before, in order, by unrefRows.
func queueRows(batch *pgx.Batch, p *store.AppendParams, enc store.AppendRows) error {
	if p.Queue != nil {
		batch.Queue(upsertQueue, p.ConversationID, p.Queue)
	}
	for _, n := range p.Names {
		batch.Queue(`INSERT INTO names (conversation_id, id) VALUES ($1, $2)`, p.ConversationID, n)
	}
	for i, m := range p.Messages {
		data := enc.Rows[i]
		var replyTo any
		if m.ReplyTo != "" {
			replyTo = m.ReplyTo
		}
		batch.Queue(`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (conversation_id, id) DO UPDATE SET seq = excluded.seq, turn_id = excluded.turn_id, reply_to = excluded.reply_to,
			agent_id = excluded.agent_id, depth = excluded.depth, data = excluded.data`,
			p.ConversationID, m.ID, m.Seq, m.TurnID, replyTo, m.AgentID, m.Depth, data)
	}
	for _, dl := range p.Deliveries {
		data, err := json.Marshal(dl)
		if err != nil {
			return err
		}
		batch.Queue(`INSERT INTO outbox (id, conversation_id, message_id, data, delivered, next_attempt_at) VALUES ($1, $2, $3, $4, 0, $5)`,
			dl.ID, p.ConversationID, dl.MessageID, string(data), dl.NextAttemptAt.Time)
	}
	if k := p.Idempotency; k != nil {
		batch.Queue(`INSERT INTO idempotency (conversation_id, agent_id, key, request_hash, seq, response, ts) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.ConversationID, k.AgentID, k.Key, k.RequestHash, k.Seq, k.Response, tsArg(k.Time))
	}
	return nil
}

// notice is one line of a notification: "CONVERSATION SEQ", and " q" when
// the append changed the conversation's prompt queue (a prompt queued,
// say), which a node with agent-wide runners must hear of even for a
// conversation it does not follow.
func notice(convID string, seq int64, queued bool) string {
	line := convID + " " + strconv.FormatInt(seq, 10)
	if queued {
		line += " " + flagQueued
	}
	return line
}

// deletedNotice is the line of a notification that a conversation was
// deleted: "CONVERSATION 0 d".
func deletedNotice(convID string) string { return convID + " 0 " + flagDeleted }

// The flags a notification's line may end with.
const (
	flagQueued  = "q" // the append changed the prompt queue
	flagDeleted = "d" // the conversation was deleted
)

// queueNotify queues the notifications of a commit. Other nodes learn of
// every commit (a text delta's too) from them; a notification carries only
// lines of (conversation, seq), as many as fit in PostgreSQL's payload
// limit, and the nodes read the events from the table (see Broker).
func queueNotify(batch *pgx.Batch, lines []string) {
	for len(lines) > 0 {
		n, size := 0, 0
		for n < len(lines) && (n == 0 || size+len(lines[n])+1 <= maxPayload) {
			size += len(lines[n]) + 1
			n++
		}
		batch.Queue(`SELECT pg_notify(`+channelSQL+`, $1)`, strings.Join(lines[:n], "\n"))
		lines = lines[n:]
	}
}

// maxPayload keeps a notification under PostgreSQL's 8000-byte limit.
const maxPayload = 7900

// upsertQueue replaces a conversation's prompt queue ($1, $2).
const upsertQueue = `INSERT INTO queues (conversation_id, queue) VALUES ($1, $2) ON CONFLICT (conversation_id) DO UPDATE SET queue = excluded.queue`

// insertEvents copies events into the log in one round trip; those enc
// names are stored as references to their message's row.
func insertEvents(ctx context.Context, tx pgx.Tx, convID string, events []parley.Event, enc store.AppendRows) error {
	err := copyEvents(ctx, tx, appendEventRows(nil, convID, events, enc))
	if isUnique(err) {
		return parley.Errorf(parley.ECONFLICT, "a seq of conversation %s is taken", convID)
	}
	return err
}

// appendEventRows appends the rows of events to rows: those enc names as
// references to their message's row (see store.EncodeAppend), with empty
// data.
func appendEventRows(rows [][]any, convID string, events []parley.Event, enc store.AppendRows) [][]any {
	for i, e := range events {
		data, ref := enc.Columns(i, e.Data)
		rows = append(rows, []any{convID, e.Seq, e.Type, e.Turn, e.TurnID, e.AgentID, string(e.Finality), tsArg(e.Time), data, ref})
	}
	return rows
}

// copyEvents copies event rows into the log in one round trip.
func copyEvents(ctx context.Context, tx pgx.Tx, rows [][]any) error {
	if len(rows) == 0 {
		return nil // a task's skipped firing
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"conversation_id", "seq", "type", "turn", "turn_id", "agent_id", "finality", "ts", "data", "ref"}, pgx.CopyFromRows(rows))
	return err
}

// CreateToken implements store.Store.
func (db *DB) CreateToken(ctx context.Context, t *parley.Token) error {
	if err := store.CheckText("the token", t.ID, t.AgentID, t.Name, t.Hash); err != nil {
		return err
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO tokens (id, kind, agent_id, name, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		t.ID, string(t.Kind), t.AgentID, t.Name, t.Hash, t.CreatedAt.Time)
	if isUnique(err) {
		return parley.Errorf(parley.EBUSY, "a token with this id or secret exists")
	}
	return err
}

// RevokeToken implements store.Store.
func (db *DB) RevokeToken(ctx context.Context, id string, at parley.Time) error {
	tag, err := db.pool.Exec(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, at.Time, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return parley.Errorf(parley.ENOTFOUND, "token %s not found", id)
	}
	return nil
}

// DeleteConversation implements store.Store. The other nodes hear of it
// (a notice marked deleted, sent when it commits), so that they end the
// conversation's subscribers and runners at once.
func (db *DB) DeleteConversation(ctx context.Context, id string) error {
	return db.tx(ctx, func(tx pgx.Tx) error {
		n, err := deleteConversation(ctx, tx, id, ``)
		if err == nil && n == 0 {
			err = parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify(`+channelSQL+`, $1)`, deletedNotice(id))
		return err
	})
}

// deleteConversation removes conversation id ($1), if its row matches the
// condition cond (SQL over the conversations row, with args as $2, …),
// with everything of it. It returns how many conversations it removed.
func deleteConversation(ctx context.Context, tx pgx.Tx, id, cond string, args ...any) (int64, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM conversations WHERE id = $1`+cond, append([]any{id}, args...)...)
	if err != nil || tag.RowsAffected() == 0 {
		return 0, err
	}
	for _, table := range []string{"events", "messages", "names", "idempotency", "outbox", "tasks", "conversation_members", "queues"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE conversation_id = $1`, id); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), nil
}
