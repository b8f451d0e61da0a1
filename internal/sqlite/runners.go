package sqlite

import (
	"context"
	"database/sql"

	"github.com/parleyhq/parley/internal/store"
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
		WHERE expires_at > ? AND (? = '' OR conversation_id IN (?, ?)) ORDER BY conversation_id, agent_id, node`,
		formatTime(p.Now), p.ConversationID, p.ConversationID, store.AllConversations)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, store.ReadRunnerLease)
}

// QueuedFor implements store.Store.
func (db *DB) QueuedFor(ctx context.Context, p store.QueuedForParams) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT q.conversation_id FROM conversation_members m
		JOIN queues q ON q.conversation_id = m.conversation_id
		WHERE m.agent_id = ? AND q.conversation_id > ? AND json_array_length(CAST(q.queue AS TEXT)) > 0
		ORDER BY q.conversation_id LIMIT ?`, p.AgentID, p.After, clampLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, store.ReadString)
}
