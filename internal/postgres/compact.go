package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// CompactionCursors implements store.Store.
func (db *DB) CompactionCursors(ctx context.Context, p store.CompactionCursorsParams) ([]store.CompactionCursor, error) {
	rows, err := db.pool.Query(ctx, `SELECT c.id, c.last_seq, k.epoch = (`+jsonOf("c.data")+` ->> 'epoch'), k.through, k.due
		FROM conversations c LEFT JOIN compaction k ON k.conversation_id = c.id
		WHERE c.id > $1 AND c.import_owner IS NULL ORDER BY c.id LIMIT $2`, p.After, clampLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.CompactionCursor
	for rows.Next() {
		var c store.CompactionCursor
		var same *bool
		var through *int64
		var due *time.Time
		if err := rows.Scan(&c.ConversationID, &c.LastSeq, &same, &through, &due); err != nil {
			return nil, err
		}
		if same != nil && *same { // else never compacted, or in another epoch: from the start
			c.Through, c.Due = *through, fromTS(due)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// errCompacting is the EBUSY of a Compact while another node compacts the
// same conversation.
func errCompacting(id string) error {
	return parley.Errorf(parley.EBUSY, "conversation %s is being compacted by another node", id)
}

// Compact implements store.Store. It runs in one transaction that holds an
// advisory lock of the conversation's compaction, so that of several nodes
// one compacts a conversation at a time; appends take no part in it (they
// write after the log's head, compaction before).
func (db *DB) Compact(ctx context.Context, p store.CompactParams) (store.CompactResult, error) {
	var res store.CompactResult
	err := db.tx(ctx, func(tx pgx.Tx) error {
		res = store.CompactResult{}
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('parley.compaction:' || $1, 0))`, p.ConversationID).Scan(&locked); err != nil {
			return err
		}
		if !locked {
			return errCompacting(p.ConversationID)
		}
		var data []byte
		var through *int64
		var cursorEpoch *string
		err := tx.QueryRow(ctx, `SELECT c.data, k.through, k.epoch FROM conversations c LEFT JOIN compaction k ON k.conversation_id = c.id
			WHERE c.id = $1 AND c.import_owner IS NULL`, p.ConversationID).Scan(&data, &through, &cursorEpoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "conversation %s not found", p.ConversationID)
		}
		if err != nil {
			return err
		}
		var conv parley.Conversation
		if err := json.Unmarshal(data, &conv); err != nil {
			return err
		}
		from := int64(0)
		if cursorEpoch != nil && *cursorEpoch == conv.Epoch && through != nil {
			from = *through
		}
		logRows, complete, err := logRows(ctx, tx, p.ConversationID, from, p.Rows())
		if err != nil {
			return err
		}
		ends, err := messageEnds(ctx, tx, p.ConversationID, logRows)
		if err != nil {
			return err
		}
		plan := store.PlanCompaction(logRows, ends, from, complete, p)
		for _, s := range plan.Spans {
			tag, err := tx.Exec(ctx, `DELETE FROM events WHERE conversation_id = $1 AND seq BETWEEN $2 AND $3`, p.ConversationID, s.From, s.To)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != int64(s.Rows) {
				return store.ErrCompactionRaced(p.ConversationID)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES ($1, $2, $3, 0, '', '', 'none', $4, $5)`,
				p.ConversationID, s.To, parley.EventCompacted, tsArg(s.Time), store.SpanData(s.From)); err != nil {
				return err
			}
			res.Compacted += s.Fresh
			res.Removed += s.Rows - 1
		}
		if res.Referenced, err = referRows(ctx, tx, p.ConversationID, plan.Refs); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO compaction (conversation_id, epoch, through, due) VALUES ($1, $2, $3, $4)
			ON CONFLICT (conversation_id) DO UPDATE SET epoch = excluded.epoch, through = excluded.through, due = excluded.due`,
			p.ConversationID, conv.Epoch, plan.Through, plan.Due.Time)
		res.Through, res.Due, res.More = plan.Through, plan.Due, plan.More
		return err
	})
	return res, err
}

// referRows stores each event refs name as a reference to its message's
// row, if the event's data is the row's JSON, and returns how many it
// stored: the rows read at once, the events written in one batch. The rows
// are locked until tx ends, so that a revert that removes one waits, then
// finds the reference (unrefRows).
func referRows(ctx context.Context, tx pgx.Tx, convID string, refs []store.CompactRef) (int, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.MessageID
	}
	rows, err := tx.Query(ctx, `SELECT id, data FROM messages WHERE conversation_id = $1 AND id = ANY($2) ORDER BY id FOR SHARE`, convID, ids)
	if err != nil {
		return 0, err
	}
	data := make(map[string][]byte, len(refs))
	for rows.Next() {
		var id string
		var row []byte
		if err := rows.Scan(&id, &row); err != nil {
			rows.Close()
			return 0, err
		}
		if data[id], err = store.WireRow(row); err != nil {
			rows.Close()
			return 0, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	for _, r := range refs {
		if d, ok := data[r.MessageID]; ok {
			batch.Queue(`UPDATE events SET ref = $1, data = ''::bytea WHERE conversation_id = $2 AND seq = $3 AND type IN ($4, $5) AND ref IS NULL AND data = $6`,
				r.MessageID, convID, r.Seq, parley.EventMessage, parley.EventMessageUpdated, d)
		}
	}
	n := 0
	results := tx.SendBatch(ctx, batch)
	for range batch.Len() {
		tag, err := results.Exec()
		if err != nil {
			results.Close()
			return 0, err
		}
		n += int(tag.RowsAffected())
	}
	return n, results.Close()
}

// unrefRows removes messages' rows, and puts each row's JSON back into the
// event that refers to it, if one does. The delete waits for a compaction
// that holds a row (referRow), and the update after it sees what that
// compaction wrote.
func unrefRows(ctx context.Context, tx pgx.Tx, convID string, ids []string) error {
	rows, err := tx.Query(ctx, `DELETE FROM messages WHERE conversation_id = $1 AND id = ANY($2) RETURNING id, data`, convID, ids)
	if err != nil {
		return err
	}
	type removed struct {
		id  string
		row []byte
	}
	var gone []removed
	for rows.Next() {
		var r removed
		if err := rows.Scan(&r.id, &r.row); err != nil {
			rows.Close()
			return err
		}
		gone = append(gone, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range gone {
		data, seqs, err := store.Unref(r.row)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE events SET ref = NULL, data = $1 WHERE conversation_id = $2 AND seq = ANY($3) AND ref = $4`,
			data, convID, seqs, r.id); err != nil {
			return err
		}
	}
	return nil
}

// logRows reads up to limit stored rows of a log after seq after, and says
// whether they reach its end.
func logRows(ctx context.Context, tx pgx.Tx, id string, after int64, limit int) ([]store.LogRow, bool, error) {
	// The id of a message or message.updated event is at the start of its
	// data ({"id":"…"), in the characters of an id.
	rows, err := tx.Query(ctx, `SELECT seq, type, ts, CASE WHEN type IN ($4, $5, $6, $9, $10) THEN data END,
			CASE WHEN type IN ($7, $8) AND ref IS NULL THEN substring(encode(substring(data FROM 1 FOR 160), 'escape') FROM '^\{"id":"([A-Za-z0-9._:-]+)"') END
		FROM events WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		id, after, limit, parley.EventChunk, parley.EventPartUpdated, parley.EventCompacted, parley.EventMessage, parley.EventMessageUpdated,
		parley.EventInputAnswered, parley.EventInputAcked)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []store.LogRow
	for rows.Next() {
		var seq int64
		var typ string
		var ts *time.Time
		var data []byte
		var mid *string
		if err := rows.Scan(&seq, &typ, &ts, &data, &mid); err != nil {
			return nil, false, err
		}
		if mid == nil {
			mid = new(string)
		}
		out = append(out, store.ReadLogRow(seq, typ, fromTS(ts), data, *mid))
	}
	return out, len(out) < limit, rows.Err()
}

// messageEnds reads whether and when the messages that rows name ended.
func messageEnds(ctx context.Context, tx pgx.Tx, id string, rows []store.LogRow) (map[string]store.MessageEnd, error) {
	ids := store.MessageIDs(rows)
	ends := make(map[string]store.MessageEnd, len(ids))
	if len(ids) == 0 {
		return ends, nil
	}
	q, err := tx.Query(ctx, `SELECT id, m ->> 'status', m ->> 'updatedAt', greatest(seq, coalesce((m ->> 'updatedSeq')::bigint, 0)) FROM
		(SELECT id, seq, `+jsonOf("data")+` AS m FROM messages WHERE conversation_id = $1 AND id = ANY($2)) r`, id, ids)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	for q.Next() {
		var mid string
		var status, at *string
		var rowSeq int64
		if err := q.Scan(&mid, &status, &at, &rowSeq); err != nil {
			return nil, err
		}
		end := store.MessageEnd{Found: true, Ended: status == nil || *status != string(parley.StatusStreaming), RowSeq: rowSeq}
		if at != nil && *at != "" {
			if err := end.At.UnmarshalJSON([]byte(`"` + *at + `"`)); err != nil {
				return nil, err
			}
		}
		ends[mid] = end
	}
	return ends, q.Err()
}

// RenewEpochs implements store.Store.
func (db *DB) RenewEpochs(ctx context.Context, p store.RenewEpochsParams) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		read := func(after string) ([]store.EpochRenewal, error) {
			rows, err := tx.Query(ctx, `SELECT c.id, c.data, e.data FROM conversations c
				LEFT JOIN events e ON e.conversation_id = c.id AND e.seq = 1 AND e.type = $1
				WHERE c.id > $2 ORDER BY c.id LIMIT $3`, parley.EventConversationCreated, after, store.RenewBatch)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.EpochRenewal, error) {
				var e store.EpochRenewal
				return e, r.Scan(&e.ID, &e.Data, &e.Created)
			})
		}
		write := func(r store.EpochRenewal) error {
			if _, err := tx.Exec(ctx, `UPDATE conversations SET data = $2, epoch = $3 WHERE id = $1`, r.ID, r.Data, r.Epoch); err != nil || r.Created == nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE events SET data = $2 WHERE conversation_id = $1 AND seq = 1`, r.ID, r.Created)
			return err
		}
		var err error
		n, err = store.RenewAll(p, read, write)
		return err
	})
	return n, err
}
