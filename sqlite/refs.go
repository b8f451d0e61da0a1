package sqlite

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley/store"
)

// MessageRefs implements store.Store.
func (db *DB) MessageRefs(ctx context.Context, p store.MessageRefsParams) ([]store.MessageRef, error) {
	q := `SELECT id, seq, agent_id FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`
	args := []any{p.ConversationID, p.After, clampLimit(p.Limit)}
	if p.IDs != nil {
		if len(p.IDs) > store.MaxHeads {
			p.IDs = p.IDs[:store.MaxHeads]
		}
		ids, err := json.Marshal(p.IDs)
		if err != nil {
			return nil, err
		}
		q = `SELECT id, seq, agent_id FROM messages WHERE conversation_id = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY seq`
		args = []any{p.ConversationID, string(ids)}
	}
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.MessageRef
	for rows.Next() {
		var r store.MessageRef
		if err := rows.Scan(&r.ID, &r.Seq, &r.AgentID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
