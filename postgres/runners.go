package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/store"
)

// RenewRunners implements store.Store: the node's rows are replaced in one
// transaction, so that other nodes never see it with none.
func (db *DB) RenewRunners(ctx context.Context, p store.RenewRunnersParams) error {
	convs := make([]string, len(p.Runners))
	agents := make([]string, len(p.Runners))
	for i, r := range p.Runners {
		convs[i], agents[i] = r.ConversationID, r.AgentID
	}
	return db.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM runners WHERE node = $1`, p.Node); err != nil {
			return err
		}
		if len(p.Runners) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO runners (node, conversation_id, agent_id, expires_at)
			SELECT $1, c, a, $4 FROM unnest($2::text[], $3::text[]) AS t (c, a)`, p.Node, convs, agents, p.Until.Time)
		return err
	})
}

// LiveRunners implements store.Store.
func (db *DB) LiveRunners(ctx context.Context, p store.LiveRunnersParams) ([]store.RunnerLease, error) {
	rows, err := db.pool.Query(ctx, `SELECT node, conversation_id, agent_id FROM runners
		WHERE expires_at > $1 AND ($2 = '' OR conversation_id = $2) ORDER BY conversation_id, agent_id, node`, p.Now.Time, p.ConversationID)
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
