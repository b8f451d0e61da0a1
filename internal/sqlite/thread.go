package sqlite

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// The thread's reads walk replyTo over the indexes (CROSS JOIN fixes the
// join order so that SQLite probes the index from the walk instead of
// scanning messages) and read no row on the way: a walk gives each
// message's id, seq and row size (length of a BLOB is read from its
// record's header), sorted without the rows; the rows are read after, as
// store.Ancestors and store.Descendants choose, by id, unsorted.
// (Sorted with their rows, SQLite would copy every row of the walk into
// its sorter: 99 ancestors of a MB, 99 MB.) plan_test.go checks each step.
const (
	// repliesQuery reads the direct replies to ?2 after seq ?3, at most ?4.
	repliesQuery = `SELECT data FROM messages WHERE conversation_id = ?1 AND reply_to = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4`
	// ancestorRefsQuery walks replyTo upwards from ?2 in conversation ?1,
	// ?3 levels at most; level 0 is the message itself.
	ancestorRefsQuery = `WITH RECURSIVE up (level, id, seq, size, reply_to) AS (
			SELECT 0, id, seq, length(data), reply_to FROM messages WHERE conversation_id = ?1 AND id = ?2
			UNION ALL
			SELECT up.level + 1, m.id, m.seq, length(m.data), m.reply_to FROM up CROSS JOIN messages m ON m.conversation_id = ?1 AND m.id = up.reply_to
			WHERE up.level < ?3
		)
		SELECT level, id, seq, size FROM up ORDER BY level`
	// descendantRefsQuery walks replies downwards from ?2 in conversation
	// ?1: the message itself (level 0), then at most ?4 after seq ?3.
	descendantRefsQuery = `WITH RECURSIVE down (level, id, seq, size) AS (
			SELECT 0, id, seq, length(data) FROM messages WHERE conversation_id = ?1 AND id = ?2
			UNION ALL
			SELECT down.level + 1, m.id, m.seq, length(m.data) FROM down CROSS JOIN messages m ON m.conversation_id = ?1 AND m.reply_to = down.id
			WHERE down.level < 100000
		)
		SELECT level, id, seq, size FROM down WHERE level = 0 OR seq > ?3 ORDER BY level > 0, seq LIMIT ?4 + 1`
	// rowsByIDQuery reads the rows of conversation ?1 whose ids are in the
	// JSON array ?2.
	rowsByIDQuery = `SELECT id, data FROM messages WHERE conversation_id = ?1 AND id IN (SELECT value FROM json_each(?2))`
)

// ListReplies implements store.Store.
func (db *DB) ListReplies(ctx context.Context, p store.ListRepliesParams) ([]*parley.Message, error) {
	rows, err := db.r.QueryContext(ctx, repliesQuery, p.ConversationID, p.MessageID, p.After, clampLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadMessages(rows, p.MaxBytes)
}

// Ancestors implements store.Store.
func (db *DB) Ancestors(ctx context.Context, p store.ThreadParams) ([]*parley.Message, error) {
	walk := db.walk(ctx, ancestorRefsQuery, p.ConversationID, p.MessageID, clampLimit(p.Limit))
	return store.Ancestors(p, walk, db.rowsByID(ctx, p.ConversationID))
}

// Descendants implements store.Store.
func (db *DB) Descendants(ctx context.Context, p store.ThreadParams) ([]*parley.Message, error) {
	walk := db.walk(ctx, descendantRefsQuery, p.ConversationID, p.MessageID, p.After, clampLimit(p.Limit))
	return store.Descendants(p, walk, db.rowsByID(ctx, p.ConversationID))
}

// walk runs the walk of a thread q.
func (db *DB) walk(ctx context.Context, q string, args ...any) store.WalkScan {
	return func(visit func(int, store.RowRef)) error {
		rows, err := db.r.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return store.EachWalked(rows, visit)
	}
}

// rowsByID reads rows of conversation id by their ids.
func (db *DB) rowsByID(ctx context.Context, id string) store.RowReader {
	return func(ids []string, each func(id string, data []byte) error) error {
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		rows, err := db.r.QueryContext(ctx, rowsByIDQuery, id, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		return store.EachRowByID(rows, each)
	}
}
