package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/store"
)

// MessageRefs implements store.Store.
func (db *DB) MessageRefs(ctx context.Context, p store.MessageRefsParams) ([]store.MessageRef, error) {
	var rows pgx.Rows
	var err error
	if p.IDs != nil {
		if len(p.IDs) > store.MaxHeads {
			p.IDs = p.IDs[:store.MaxHeads]
		}
		rows, err = db.pool.Query(ctx, `SELECT id, seq, agent_id FROM messages WHERE conversation_id = $1 AND id = ANY($2) ORDER BY seq`, p.ConversationID, p.IDs)
	} else {
		rows, err = db.pool.Query(ctx, `SELECT id, seq, agent_id FROM messages WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, p.ConversationID, p.After, clampLimit(p.Limit))
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.MessageRef, error) {
		var r store.MessageRef
		err := row.Scan(&r.ID, &r.Seq, &r.AgentID)
		return r, err
	})
}
