package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
	sqlite3 "modernc.org/sqlite/lib"
)

// statements are the writer's prepared statements.
type statements struct {
	insertEvent, insertName, updateMessage, upsertMessage, bumpHead, bumpImportHead, setState, setImportState, insertIdempotency, upsertQueue *sql.Stmt
	savepoint, release, rollbackTo                                                                                                            *sql.Stmt
}

func (s *statements) prepare(ctx context.Context, db *sql.DB) error {
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.PrepareContext(ctx, q)
		return st
	}
	s.insertEvent = prep(`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data, ref) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	s.insertName = prep(`INSERT INTO names (conversation_id, id) VALUES (?, ?)`)
	// updateMessage rewrites a row's data when none of its indexed columns
	// changes, which is nearly every write of a message after its first:
	// SQLite rewrites the entries of every index whose columns an UPDATE
	// sets, changed or not, and upsertMessage sets them all (four index
	// pages made dirty for nothing, in each append that writes a row).
	s.updateMessage = prep(`UPDATE messages SET data = ?, streaming = ? WHERE conversation_id = ? AND id = ?
		AND seq = ? AND turn_id = ? AND reply_to IS ? AND agent_id = ? AND depth = ?`)
	s.upsertMessage = prep(`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data, streaming) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (conversation_id, id) DO UPDATE SET seq = excluded.seq, turn_id = excluded.turn_id, reply_to = excluded.reply_to,
		agent_id = excluded.agent_id, depth = excluded.depth, data = excluded.data, streaming = excluded.streaming`)
	// An append moves its conversation's head, if the head is where the
	// append was decided (and the conversation is the epoch it was decided
	// for, not being imported); the conversations row, which it only
	// reads, it writes only when the state snapshot or the import's lease
	// changes (see the migration that made heads).
	// It moves the last activity (?5, the time of the append's last event)
	// too, never back (see store.Store.ListConversations).
	s.bumpHead = prep(`UPDATE heads SET last_seq = ?1, last_at = max(last_at, ?5) WHERE conversation_id = ?2 AND last_seq = ?3
		AND EXISTS (SELECT 1 FROM conversations WHERE id = ?2 AND import_owner IS NULL AND (?4 = '' OR epoch = ?4))`)
	s.bumpImportHead = prep(`UPDATE heads SET last_seq = ?1, last_at = max(last_at, ?5) WHERE conversation_id = ?2 AND last_seq = ?3
		AND EXISTS (SELECT 1 FROM conversations WHERE id = ?2 AND import_owner = ?4)`)
	s.setState = prep(`UPDATE conversations SET state = ? WHERE id = ?`)
	s.setImportState = prep(`UPDATE conversations SET state = COALESCE(?, state), import_expires = ? WHERE id = ?`)
	s.upsertQueue = prep(`INSERT INTO queues (conversation_id, queue) VALUES (?, ?) ON CONFLICT (conversation_id) DO UPDATE SET queue = excluded.queue`)
	s.insertIdempotency = prep(`INSERT INTO idempotency (conversation_id, agent_id, key, request_hash, seq, response, ts) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	s.savepoint = prep(`SAVEPOINT w`)
	s.release = prep(`RELEASE w`)
	s.rollbackTo = prep(`ROLLBACK TO w`)
	return err
}

func (s *statements) close() {
	for _, st := range []*sql.Stmt{s.insertEvent, s.insertName, s.updateMessage, s.upsertMessage, s.bumpHead, s.bumpImportHead, s.setState, s.setImportState, s.insertIdempotency, s.upsertQueue, s.savepoint, s.release, s.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		c := se.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// CreateConversation implements store.Store.
func (db *DB) CreateConversation(ctx context.Context, p store.CreateConversationParams) error {
	data, err := json.Marshal(p.Conversation)
	if err != nil {
		return err
	}
	if err := store.CheckDense(p.Events, 0); err != nil {
		return err
	}
	if err := store.CheckConversation(p); err != nil {
		return err
	}
	if err := store.CheckLease(p.Import); err != nil {
		return err
	}
	var owner, expires any // NULL: an ordinary conversation
	if p.Import != nil {
		owner, expires = p.Import.Owner, formatTime(p.Import.Expires)
	}
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		last := int64(len(p.Events))
		res, err := tx.ExecContext(ctx, `INSERT INTO conversations (id, created_at, data, state, import_owner, import_expires, epoch)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			p.Conversation.ID, formatTime(p.Conversation.CreatedAt), data, p.State, owner, expires, p.Conversation.Epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			var importing bool
			if err := tx.QueryRowContext(ctx, `SELECT import_owner IS NOT NULL FROM conversations WHERE id = ?`, p.Conversation.ID).Scan(&importing); err != nil {
				return err
			}
			return store.ErrTaken(p.Conversation.ID, importing)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO heads (conversation_id, last_seq, last_at) VALUES (?, ?, ?)`,
			p.Conversation.ID, last, lastAt(p.Events, formatTime(p.Conversation.CreatedAt))); err != nil {
			return err
		}
		for _, m := range p.Members {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO conversation_members (agent_id, created_at, conversation_id) VALUES (?, ?, ?)`,
				m, formatTime(p.Conversation.CreatedAt), p.Conversation.ID); err != nil {
				return err
			}
		}
		if err := db.writeQueue(ctx, tx, p.Conversation.ID, p.Queue); err != nil {
			return err
		}
		return db.insertEvents(ctx, tx, p.Conversation.ID, p.Events, store.AppendRows{})
	})
}

// Append implements store.Store.
func (db *DB) Append(ctx context.Context, p store.AppendParams) error {
	if err := store.CheckDense(p.Events, p.ExpectSeq); err != nil {
		return err
	}
	if err := store.CheckLease(p.Import); err != nil {
		return err
	}
	enc, err := store.EncodeAppend(&p) // here, not on the writer's serial path
	if err != nil {
		return err
	}
	return db.writeCommitted(ctx, func(ctx context.Context, tx *sql.Tx) error { return db.appendTx(ctx, tx, p, enc) }, p.Committed)
}

// AppendAsync implements store.Store.
func (db *DB) AppendAsync(p store.AppendParams, done func(error)) {
	if err := store.CheckDense(p.Events, p.ExpectSeq); err != nil {
		done(err)
		return
	}
	if err := store.CheckLease(p.Import); err != nil {
		done(err)
		return
	}
	enc, err := store.EncodeAppend(&p)
	if err != nil {
		done(err)
		return
	}
	db.writeAsync(func(ctx context.Context, tx *sql.Tx) error { return db.appendTx(ctx, tx, p, enc) }, p.Committed, done)
}

// Exclusive implements store.Store. The one writer of the database holds
// the write transaction while fn runs, so nothing else is written then.
func (db *DB) Exclusive(ctx context.Context, id string, fn func(write func(store.AppendParams) error) error) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var seq int64
		err := tx.QueryRowContext(ctx, `SELECT h.last_seq FROM conversations c JOIN heads h ON h.conversation_id = c.id
			WHERE c.id = ? AND c.import_owner IS NULL`, id).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
		}
		if err != nil {
			return err
		}
		return fn(store.OnceFor(id, func(p store.AppendParams) error {
			enc, err := store.EncodeAppend(&p)
			if err != nil {
				return err
			}
			return db.appendTx(ctx, tx, p, enc)
		}))
	})
}

// appendTx makes the append p, whose rows and references are enc
// (store.EncodeAppend), in the write transaction tx.
func (db *DB) appendTx(ctx context.Context, tx *sql.Tx, p store.AppendParams, enc store.AppendRows) error {
	last := p.ExpectSeq + int64(len(p.Events))
	var res sql.Result
	var err error
	if im := p.Import; im != nil {
		res, err = tx.StmtContext(ctx, db.stmts.bumpImportHead).ExecContext(ctx, last, p.ConversationID, p.ExpectSeq, im.Owner, lastAt(p.Events, ""))
	} else {
		res, err = tx.StmtContext(ctx, db.stmts.bumpHead).ExecContext(ctx, last, p.ConversationID, p.ExpectSeq, p.Epoch, lastAt(p.Events, ""))
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return err
		}
		var head store.Head
		var owner sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT h.last_seq, c.epoch, c.import_owner FROM conversations c JOIN heads h ON h.conversation_id = c.id
			WHERE c.id = ?`, p.ConversationID).Scan(&head.Seq, &head.Epoch, &owner)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return store.AppendMiss(p, err == nil, head, owner.String)
	}
	switch {
	case p.Import != nil:
		_, err = tx.StmtContext(ctx, db.stmts.setImportState).ExecContext(ctx, p.State, formatTime(p.Import.Expires), p.ConversationID)
	case p.State != nil:
		_, err = tx.StmtContext(ctx, db.stmts.setState).ExecContext(ctx, p.State, p.ConversationID)
	}
	if err != nil {
		return err
	}
	if err := db.insertEvents(ctx, tx, p.ConversationID, p.Events, enc); err != nil {
		return err
	}
	if err := changeConversation(ctx, tx, p.Conversation); err != nil {
		return err
	}
	if len(p.Names) > 0 {
		ins := tx.StmtContext(ctx, db.stmts.insertName)
		for _, n := range p.Names {
			_, err := ins.ExecContext(ctx, p.ConversationID, n)
			if isUnique(err) {
				return store.ErrIDTaken(n)
			}
			if err != nil {
				return err
			}
		}
	}
	if err := db.writeQueue(ctx, tx, p.ConversationID, p.Queue); err != nil {
		return err
	}
	var update, upsert *sql.Stmt
	if len(p.Messages) > 0 {
		update, upsert = tx.StmtContext(ctx, db.stmts.updateMessage), tx.StmtContext(ctx, db.stmts.upsertMessage)
	}
	for i, m := range p.Messages {
		data := enc.Rows[i]
		var replyTo any
		if m.ReplyTo != "" {
			replyTo = m.ReplyTo
		}
		// streaming spares the search index's triggers a parse of the
		// row's JSON on each write of a message still streaming.
		streaming := m.Status == parley.StatusStreaming
		res, err := update.ExecContext(ctx, data, streaming, p.ConversationID, m.ID, m.Seq, m.TurnID, replyTo, m.AgentID, m.Depth)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			continue
		}
		// A new message, or one whose indexed columns change.
		if _, err := upsert.ExecContext(ctx, p.ConversationID, m.ID, m.Seq, m.TurnID, replyTo, m.AgentID, m.Depth, data, streaming); err != nil {
			return err
		}
	}
	if p.Task != nil {
		if err := advanceTask(ctx, tx, p.Task); err != nil {
			return err
		}
	}
	for _, dl := range p.Deliveries {
		data, err := json.Marshal(dl)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (id, conversation_id, message_id, data, delivered, next_attempt_at) VALUES (?, ?, ?, ?, 0, ?)`,
			dl.ID, p.ConversationID, dl.MessageID, data, formatTime(dl.NextAttemptAt)); err != nil {
			return err
		}
	}
	if err := unrefRows(ctx, tx, p.ConversationID, p.RemoveMessages); err != nil {
		return err
	}
	if k := p.Idempotency; k != nil {
		_, err := tx.StmtContext(ctx, db.stmts.insertIdempotency).ExecContext(ctx,
			p.ConversationID, k.AgentID, k.Key, k.RequestHash, k.Seq, k.Response, formatTime(k.Time))
		if isUnique(err) {
			return parley.Errorf(parley.EBUSY, "client request id %q was already used", k.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// changeConversation rewrites a conversation's record and the agents it
// is listed for, if ch is set (store.AppendParams.Conversation). Its
// members' rows keep the conversation's creation time.
func changeConversation(ctx context.Context, tx *sql.Tx, ch *store.ConversationChange) error {
	if ch == nil {
		return nil
	}
	data, err := json.Marshal(ch.Conversation)
	if err != nil {
		return err
	}
	members, err := json.Marshal(ch.Members)
	if err != nil {
		return err
	}
	id := ch.Conversation.ID
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET data = ? WHERE id = ?`, data, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_members WHERE conversation_id = ?1
		AND agent_id NOT IN (SELECT value FROM json_each(?2))`, id, string(members)); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO conversation_members (agent_id, created_at, conversation_id)
		SELECT j.value, c.created_at, c.id FROM conversations c, json_each(?2) j WHERE c.id = ?1`, id, string(members))
	return err
}

// writeQueue replaces a conversation's prompt queue, unless queue is nil.
func (db *DB) writeQueue(ctx context.Context, tx *sql.Tx, convID string, queue []byte) error {
	if queue == nil {
		return nil
	}
	_, err := tx.StmtContext(ctx, db.stmts.upsertQueue).ExecContext(ctx, convID, queue)
	return err
}

// insertEvents inserts an append's events; those enc names are stored as
// references to their message's row (see store.EncodeAppend).
func (db *DB) insertEvents(ctx context.Context, tx *sql.Tx, convID string, events []parley.Event, enc store.AppendRows) error {
	ins := tx.StmtContext(ctx, db.stmts.insertEvent)
	for i, e := range events {
		data, ref := enc.Columns(i, e.Data)
		_, err := ins.ExecContext(ctx, convID, e.Seq, e.Type, e.Turn, e.TurnID, e.AgentID, string(e.Finality), formatTime(e.Time), data, ref)
		if isUnique(err) {
			return parley.Errorf(parley.ECONFLICT, "seq %d of conversation %s is taken", e.Seq, convID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lastAt is the last activity events bring (the time of the last, as
// formatTime writes it), or or if there are none.
func lastAt(events []parley.Event, or string) string {
	if len(events) == 0 {
		return or
	}
	return formatTime(events[len(events)-1].Time)
}

// formatTime writes a time as Parley does everywhere.
func formatTime(t parley.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(parley.TimeLayout)
}

// parseTime reads a time written by formatTime.
func parseTime(s string) (parley.Time, error) {
	var t parley.Time
	if s == "" {
		return t, nil
	}
	if err := t.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		return t, fmt.Errorf("bad time %q: %w", s, err)
	}
	return t, nil
}

// DeleteConversation implements store.Store.
func (db *DB) DeleteConversation(ctx context.Context, id string) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := deleteConversation(ctx, tx, id, ``)
		if err == nil && n == 0 {
			err = parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
		}
		return err
	})
}

// deleteConversation removes conversation id, if its row matches the
// condition cond (SQL over the conversations row, with args), with
// everything of it. It returns how many conversations it removed: 0 or 1.
func deleteConversation(ctx context.Context, tx *sql.Tx, id, cond string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = ?`+cond, append([]any{id}, args...)...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, err
	}
	for _, table := range []string{"heads", "events", "messages", "names", "idempotency", "outbox", "tasks", "conversation_members", "queues"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE conversation_id = ?`, id); err != nil {
			return 0, err
		}
	}
	return n, nil
}
