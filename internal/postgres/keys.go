package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/store"
)

// A message's key is read from the columns its row is indexed by, beside
// its data, which PostgreSQL keeps out of line when large: it is not read.
const (
	keyColumns = `id, seq, turn_id, agent_id, coalesce(reply_to, '') AS reply_to, depth`
	keyNames   = `id, seq, turn_id, agent_id, reply_to, depth`
)

// MessageKey implements store.Store.
func (db *DB) MessageKey(ctx context.Context, conversationID, messageID string) (*store.MessageKey, error) {
	k, err := store.ReadMessageKey(db.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM messages WHERE conversation_id = $1 AND id = $2`, conversationID, messageID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.NoMessage(conversationID, messageID)
	}
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// ListMessageKeys implements store.Store.
func (db *DB) ListMessageKeys(ctx context.Context, p store.ListMessagesParams) ([]store.MessageKey, error) {
	q, args := listQuery(p, keyColumns, keyNames)
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, store.ReadMessageKey)
}
