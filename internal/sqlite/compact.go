package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// CompactionCursors implements store.Store.
func (db *DB) CompactionCursors(ctx context.Context, p store.CompactionCursorsParams) ([]store.CompactionCursor, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT c.id, h.last_seq, k.epoch = json_extract(CAST(c.data AS TEXT), '$.epoch'), k.through, k.due
		FROM conversations c JOIN heads h ON h.conversation_id = c.id LEFT JOIN compaction k ON k.conversation_id = c.id
		WHERE c.id > ? AND c.import_owner IS NULL ORDER BY c.id LIMIT ?`, p.After, clampLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.CompactionCursor
	for rows.Next() {
		var c store.CompactionCursor
		var same sql.NullBool
		var through sql.NullInt64
		var due sql.NullString
		if err := rows.Scan(&c.ConversationID, &c.LastSeq, &same, &through, &due); err != nil {
			return nil, err
		}
		if same.Bool { // else never compacted, or in another epoch: from the start
			c.Through = through.Int64
			if c.Due, err = parseTime(due.String); err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Compact implements store.Store. It reads on a reader connection, then
// writes in the writer's next commit, where it checks that the rows it read
// are still there: only a compaction changes stored rows of a log, and one
// process owns the file.
func (db *DB) Compact(ctx context.Context, p store.CompactParams) (store.CompactResult, error) {
	var res store.CompactResult
	var data []byte
	var through sql.NullInt64
	var cursorEpoch sql.NullString
	err := db.r.QueryRowContext(ctx, `SELECT c.data, k.through, k.epoch FROM conversations c LEFT JOIN compaction k ON k.conversation_id = c.id
		WHERE c.id = ? AND c.import_owner IS NULL`, p.ConversationID).Scan(&data, &through, &cursorEpoch)
	if errors.Is(err, sql.ErrNoRows) {
		return res, parley.Errorf(parley.ENOTFOUND, "conversation %s not found", p.ConversationID)
	}
	if err != nil {
		return res, err
	}
	var conv parley.Conversation
	if err := json.Unmarshal(data, &conv); err != nil {
		return res, err
	}
	from := int64(0)
	if cursorEpoch.String == conv.Epoch {
		from = through.Int64
	}
	logRows, complete, err := db.logRows(ctx, p.ConversationID, from, p.Rows())
	if err != nil {
		return res, err
	}
	ends, err := db.messageEnds(ctx, p.ConversationID, logRows)
	if err != nil {
		return res, err
	}
	plan := store.PlanCompaction(logRows, ends, from, complete, p)
	err = db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res.Referenced = 0 // counted again if the batch is run again (see commit)
		var epoch sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT json_extract(CAST(data AS TEXT), '$.epoch') FROM conversations WHERE id = ? AND import_owner IS NULL`,
			p.ConversationID).Scan(&epoch)
		if errors.Is(err, sql.ErrNoRows) || err == nil && epoch.String != conv.Epoch {
			return store.ErrCompactionRaced(p.ConversationID)
		}
		if err != nil {
			return err
		}
		for _, s := range plan.Spans {
			r, err := tx.ExecContext(ctx, `DELETE FROM events WHERE conversation_id = ? AND seq BETWEEN ? AND ?`, p.ConversationID, s.From, s.To)
			if err != nil {
				return err
			}
			if n, err := r.RowsAffected(); err != nil || n != int64(s.Rows) {
				return errors.Join(err, store.ErrCompactionRaced(p.ConversationID))
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES (?, ?, ?, 0, '', '', 'none', ?, ?)`,
				p.ConversationID, s.To, parley.EventCompacted, formatTime(s.Time), store.SpanData(s.From)); err != nil {
				return err
			}
		}
		for _, r := range plan.Refs {
			n, err := referRow(ctx, tx, p.ConversationID, r)
			if err != nil {
				return err
			}
			res.Referenced += n
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO compaction (conversation_id, epoch, through, due) VALUES (?, ?, ?, ?)
			ON CONFLICT (conversation_id) DO UPDATE SET epoch = excluded.epoch, through = excluded.through, due = excluded.due`,
			p.ConversationID, conv.Epoch, plan.Through, formatTime(plan.Due))
		return err
	})
	if err != nil {
		return res, err
	}
	for _, s := range plan.Spans {
		res.Compacted += s.Fresh
		res.Removed += s.Rows - 1
	}
	res.Through, res.Due, res.More = plan.Through, plan.Due, plan.More
	return res, nil
}

// referRow stores the event r names as a reference to its message's row,
// if the event's data is the row's JSON, and says whether it did.
func referRow(ctx context.Context, tx *sql.Tx, convID string, r store.CompactRef) (int, error) {
	var row []byte
	err := tx.QueryRowContext(ctx, `SELECT data FROM messages WHERE conversation_id = ? AND id = ?`, convID, r.MessageID).Scan(&row)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	data, err := store.WireRow(row)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE events SET ref = ?, data = X'' WHERE conversation_id = ? AND seq = ? AND type IN (?, ?) AND ref IS NULL AND data = ?`,
		r.MessageID, convID, r.Seq, parley.EventMessage, parley.EventMessageUpdated, data)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// unrefRows removes messages' rows, and puts each row's JSON back into the
// event that refers to it, if one does.
func unrefRows(ctx context.Context, tx *sql.Tx, convID string, ids []string) error {
	for _, id := range ids {
		var row []byte
		err := tx.QueryRowContext(ctx, `DELETE FROM messages WHERE conversation_id = ? AND id = ? RETURNING data`, convID, id).Scan(&row)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		data, seqs, err := store.Unref(row)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE events SET ref = NULL, data = ? WHERE conversation_id = ? AND seq IN (?, ?) AND ref = ?`,
			data, convID, seqs[0], seqs[1], id); err != nil {
			return err
		}
	}
	return nil
}

// logRows reads up to limit stored rows of a log after seq after, and says
// whether they reach its end.
func (db *DB) logRows(ctx context.Context, id string, after int64, limit int) ([]store.LogRow, bool, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT seq, type, ts, CASE WHEN type IN (?, ?, ?, ?, ?) THEN data END,
			CASE WHEN type IN (?, ?) AND ref IS NULL THEN json_extract(CAST(data AS TEXT), '$.id') END FROM events
		WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		parley.EventChunk, parley.EventPartUpdated, parley.EventCompacted, parley.EventInputAnswered, parley.EventInputAcked,
		parley.EventMessage, parley.EventMessageUpdated, id, after, limit)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []store.LogRow
	for rows.Next() {
		var seq int64
		var typ, ts string
		var data []byte
		var mid sql.NullString
		if err := rows.Scan(&seq, &typ, &ts, &data, &mid); err != nil {
			return nil, false, err
		}
		t, err := parseTime(ts)
		if err != nil {
			return nil, false, err
		}
		out = append(out, store.ReadLogRow(seq, typ, t, data, mid.String))
	}
	return out, len(out) < limit, rows.Err()
}

// messageEnds reads whether and when the messages that rows name ended.
func (db *DB) messageEnds(ctx context.Context, id string, rows []store.LogRow) (map[string]store.MessageEnd, error) {
	ids := store.MessageIDs(rows)
	ends := make(map[string]store.MessageEnd, len(ids))
	if len(ids) == 0 {
		return ends, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	q, err := db.r.QueryContext(ctx, `SELECT id, json_extract(CAST(data AS TEXT), '$.status'), json_extract(CAST(data AS TEXT), '$.updatedAt'),
			max(seq, coalesce(json_extract(CAST(data AS TEXT), '$.updatedSeq'), 0)) FROM messages
		WHERE conversation_id = ? AND id IN (SELECT value FROM json_each(?))`, id, string(list))
	if err != nil {
		return nil, err
	}
	defer q.Close()
	for q.Next() {
		var mid string
		var status, at sql.NullString
		var rowSeq int64
		if err := q.Scan(&mid, &status, &at, &rowSeq); err != nil {
			return nil, err
		}
		end := store.MessageEnd{Found: true, Ended: status.String != string(parley.StatusStreaming), RowSeq: rowSeq}
		if end.At, err = parseTime(at.String); err != nil {
			return nil, err
		}
		ends[mid] = end
	}
	return ends, q.Err()
}

// RenewEpochs implements store.Store.
func (db *DB) RenewEpochs(ctx context.Context, p store.RenewEpochsParams) (int, error) {
	n := 0
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		read := func(after string) ([]store.EpochRenewal, error) {
			rows, err := tx.QueryContext(ctx, `SELECT c.id, c.data, e.data FROM conversations c
				LEFT JOIN events e ON e.conversation_id = c.id AND e.seq = 1 AND e.type = ?
				WHERE c.id > ? ORDER BY c.id LIMIT ?`, parley.EventConversationCreated, after, store.RenewBatch)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []store.EpochRenewal
			for rows.Next() {
				var r store.EpochRenewal
				if err := rows.Scan(&r.ID, &r.Data, &r.Created); err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, rows.Err()
		}
		write := func(r store.EpochRenewal) error {
			if _, err := tx.ExecContext(ctx, `UPDATE conversations SET data = ?, epoch = ? WHERE id = ?`, r.Data, r.Epoch, r.ID); err != nil || r.Created == nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE events SET data = ? WHERE conversation_id = ? AND seq = 1`, r.Created, r.ID)
			return err
		}
		var err error
		n, err = store.RenewAll(p, read, write)
		return err
	})
	return n, err
}
