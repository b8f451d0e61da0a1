package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// CreateConversation implements store.Store.
func (db *DB) CreateConversation(ctx context.Context, p store.CreateConversationParams) error {
	if err := store.CheckDense(p.Events, 0); err != nil {
		return err
	}
	data, err := json.Marshal(p.Conversation)
	if err != nil {
		return err
	}
	return db.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO conversations (id, created_at, data, last_seq, state) VALUES ($1, $2, $3, $4, $5)`,
			p.Conversation.ID, p.Conversation.CreatedAt.Time, data, int64(len(p.Events)), p.State)
		if isUnique(err) {
			return parley.Errorf(parley.EBUSY, "conversation %s already exists", p.Conversation.ID)
		}
		if err != nil {
			return err
		}
		return insertEvents(ctx, tx, p.Conversation.ID, p.Events)
	})
}

// Append implements store.Store. The conditional UPDATE takes the
// conversation's row lock until commit, so appends to one conversation
// commit in seq order; a writer that read an older seq matches no row.
func (db *DB) Append(ctx context.Context, p store.AppendParams) error {
	if err := store.CheckDense(p.Events, p.ExpectSeq); err != nil {
		return err
	}
	last := p.ExpectSeq + int64(len(p.Events))
	return db.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE conversations SET last_seq = $1, state = $2 WHERE id = $3 AND last_seq = $4`, last, p.State, p.ConversationID, p.ExpectSeq)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var seq int64
			err := tx.QueryRow(ctx, `SELECT last_seq FROM conversations WHERE id = $1`, p.ConversationID).Scan(&seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return parley.Errorf(parley.ENOTFOUND, "conversation %s not found", p.ConversationID)
			}
			if err != nil {
				return err
			}
			return parley.Errorf(parley.ECONFLICT, "conversation %s is at seq %d, not %d", p.ConversationID, seq, p.ExpectSeq)
		}
		if err := insertEvents(ctx, tx, p.ConversationID, p.Events); err != nil {
			return err
		}
		if p.Task != nil {
			if err := advanceTask(ctx, tx, p.Task); err != nil {
				return err
			}
		}
		batch := &pgx.Batch{}
		for _, m := range p.Messages {
			data, err := json.Marshal(m)
			if err != nil {
				return err
			}
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
		if len(p.RemoveMessages) > 0 {
			batch.Queue(`DELETE FROM messages WHERE conversation_id = $1 AND id = ANY($2)`, p.ConversationID, p.RemoveMessages)
		}
		if k := p.Idempotency; k != nil {
			batch.Queue(`INSERT INTO idempotency (conversation_id, agent_id, key, request_hash, seq, response, ts) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				p.ConversationID, k.AgentID, k.Key, k.RequestHash, k.Seq, k.Response, tsArg(k.Time))
		}
		if batch.Len() == 0 {
			return nil
		}
		err = tx.SendBatch(ctx, batch).Close()
		if isUnique(err) {
			return parley.Errorf(parley.EBUSY, "client request id %q was already used", p.Idempotency.Key)
		}
		return err
	})
}

// insertEvents copies events into the log in one round trip.
func insertEvents(ctx context.Context, tx pgx.Tx, convID string, events []parley.Event) error {
	rows := make([][]any, len(events))
	for i, e := range events {
		rows[i] = []any{convID, e.Seq, e.Type, e.Turn, e.TurnID, e.AgentID, string(e.Finality), tsArg(e.Time), []byte(e.Data)}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"conversation_id", "seq", "type", "turn", "turn_id", "agent_id", "finality", "ts", "data"}, pgx.CopyFromRows(rows))
	if isUnique(err) {
		return parley.Errorf(parley.ECONFLICT, "a seq of conversation %s is taken", convID)
	}
	return err
}

// CreateToken implements store.Store.
func (db *DB) CreateToken(ctx context.Context, t *parley.Token) error {
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

// DeleteConversation implements store.Store.
func (db *DB) DeleteConversation(ctx context.Context, id string) error {
	return db.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM conversations WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return parley.Errorf(parley.ENOTFOUND, "conversation %s not found", id)
		}
		for _, table := range []string{"events", "messages", "idempotency", "outbox", "tasks"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE conversation_id = $1`, id); err != nil {
				return err
			}
		}
		return nil
	})
}
