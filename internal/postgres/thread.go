package postgres

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// The thread's reads walk replyTo over the indexes and read no row on the
// way: a walk gives each message's id, seq and row size (octet_length of
// a stored value reads its header), sorted without the rows; the rows are
// read after, as store.Ancestors and store.Descendants choose, by
// id. plan_test.go checks that each step is an index probe.
const (
	// repliesQuery reads the direct replies to $2 after seq $3, at most $4.
	repliesQuery = `SELECT data FROM messages WHERE conversation_id = $1 AND reply_to = $2 AND seq > $3 ORDER BY seq LIMIT $4`
	// ancestorRefsQuery walks replyTo upwards from $2 in conversation $1,
	// $3 levels at most; level 0 is the message itself.
	ancestorRefsQuery = `WITH RECURSIVE up (level, id, seq, size, reply_to) AS (
			SELECT 0, id, seq, octet_length(data), reply_to FROM messages WHERE conversation_id = $1 AND id = $2
			UNION ALL
			SELECT up.level + 1, m.id, m.seq, octet_length(m.data), m.reply_to FROM up JOIN messages m ON m.conversation_id = $1 AND m.id = up.reply_to
			WHERE up.level < $3
		)
		SELECT level, id, seq, size FROM up ORDER BY level`
	// descendantRefsQuery walks replies downwards from $2 in conversation
	// $1: the message itself (level 0), then at most $4 after seq $3.
	descendantRefsQuery = `WITH RECURSIVE down (level, id, seq, size) AS (
			SELECT 0, id, seq, octet_length(data) FROM messages WHERE conversation_id = $1 AND id = $2
			UNION ALL
			SELECT down.level + 1, m.id, m.seq, octet_length(m.data) FROM down JOIN messages m ON m.conversation_id = $1 AND m.reply_to = down.id
			WHERE down.level < 100000
		)
		SELECT level, id, seq, size FROM down WHERE level = 0 OR seq > $3 ORDER BY level > 0, seq LIMIT $4 + 1`
	// rowsByIDQuery reads the rows of conversation $1 whose ids are in $2.
	rowsByIDQuery = `SELECT id, data FROM messages WHERE conversation_id = $1 AND id = ANY($2)`
)

// ListReplies implements store.Store.
func (db *DB) ListReplies(ctx context.Context, p store.ListRepliesParams) ([]*parley.Message, error) {
	return db.queryMessages(ctx, p.MaxBytes, repliesQuery, p.ConversationID, p.MessageID, p.After, clampLimit(p.Limit))
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
		rows, err := db.pool.Query(ctx, q, args...)
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
		rows, err := db.pool.Query(ctx, rowsByIDQuery, id, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		return store.EachRowByID(rows, each)
	}
}
