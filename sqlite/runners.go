package sqlite

import (
	"context"
	"database/sql"

	"github.com/parleyhq/parley/store"
)

// RenewRunners implements store.Store.
func (db *DB) RenewRunners(ctx context.Context, p store.RenewRunnersParams) error {
	until := formatTime(p.Until)
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM runners WHERE node = ?`, p.Node); err != nil {
			return err
		}
		for _, r := range p.Runners {
			if _, err := tx.ExecContext(ctx, `INSERT INTO runners (node, conversation_id, agent_id, expires_at) VALUES (?, ?, ?, ?)`,
				p.Node, r.ConversationID, r.AgentID, until); err != nil {
				return err
			}
		}
		return nil
	})
}

// LiveRunners implements store.Store.
func (db *DB) LiveRunners(ctx context.Context, p store.LiveRunnersParams) ([]store.RunnerLease, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT node, conversation_id, agent_id FROM runners
		WHERE expires_at > ? AND (? = '' OR conversation_id = ?) ORDER BY conversation_id, agent_id, node`,
		formatTime(p.Now), p.ConversationID, p.ConversationID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.RunnerLease
	for rows.Next() {
		var r store.RunnerLease
		if err := rows.Scan(&r.Node, &r.ConversationID, &r.AgentID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
