package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/store"
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
		WHERE expires_at > $1 AND ($2 = '' OR conversation_id IN ($2, $3)) ORDER BY conversation_id, agent_id, node`, p.Now.Time, p.ConversationID, store.AllConversations)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, store.ReadRunnerLease)
}

// QueuedFor implements store.Store.
func (db *DB) QueuedFor(ctx context.Context, p store.QueuedForParams) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT q.conversation_id FROM conversation_members m
		JOIN queues q ON q.conversation_id = m.conversation_id
		WHERE m.agent_id = $1 AND q.conversation_id > $2 AND q.queue <> '[]'::bytea
		ORDER BY q.conversation_id LIMIT $3`, p.AgentID, p.After, clampLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, store.ReadString)
}
