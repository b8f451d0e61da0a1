package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// CreateTask implements store.Store. Creations for one agent take turns
// (a transaction-scoped advisory lock on the agent), so that two cannot both
// count the same tasks and pass the bound together.
func (db *DB) CreateTask(ctx context.Context, p store.CreateTaskParams) error {
	t := p.Task
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := store.CheckTask(t, data); err != nil {
		return err
	}
	return db.tx(ctx, func(tx pgx.Tx) error {
		if p.MaxPerAgent > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('parley.tasks.agent:' || $1, 0))`, t.AgentID); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE (`+jsonOfText("data")+` ->> 'agentId') = $1`, t.AgentID).Scan(&n); err != nil {
				return err
			}
			if n >= p.MaxPerAgent {
				return store.TooManyTasks(t.AgentID, p.MaxPerAgent)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO tasks (id, conversation_id, data, next_run_at, created_at) VALUES ($1, $2, $3, $4, $5)`,
			t.ID, t.ConversationID, string(data), t.NextRunAt.Time, t.CreatedAt.Time)
		if isUnique(err) {
			return parley.Errorf(parley.EBUSY, "task %s exists", t.ID)
		}
		return err
	})
}

// GetTask implements store.Store.
func (db *DB) GetTask(ctx context.Context, id string) (*parley.Task, error) {
	ts, err := db.queryTasks(ctx, `SELECT data FROM tasks WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, parley.Errorf(parley.ENOTFOUND, "task %s not found", id)
	}
	return ts[0], nil
}

// ListTasks implements store.Store.
func (db *DB) ListTasks(ctx context.Context) ([]*parley.Task, error) {
	return db.queryTasks(ctx, `SELECT data FROM tasks ORDER BY created_at, id`)
}

// TakeDueTasks implements store.Store: of the due tasks not leased, the
// longest overdue PerAgent of each agent, then of those the longest
// overdue PerConversation of each conversation, then the longest overdue
// Limit, leased in one statement. Those another node's take holds locked
// are skipped (FOR UPDATE SKIP LOCKED), and one whose lease another take
// wrote since this statement's snapshot is left out when its row is
// locked and read again.
func (db *DB) TakeDueTasks(ctx context.Context, p store.TakeDueTasksParams) ([]*parley.Task, error) {
	ts, err := db.queryTasks(ctx, `
WITH fair AS (
	SELECT id FROM (
		SELECT id, next_run_at,
			ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY next_run_at, id) AS in_conversation
		FROM (
			SELECT id, next_run_at, conversation_id,
				ROW_NUMBER() OVER (PARTITION BY (`+jsonOfText("data")+` ->> 'agentId') ORDER BY next_run_at, id) AS of_agent
			FROM tasks WHERE `+dueUnleased+`
		) AS due WHERE of_agent <= $2
	) AS fair WHERE in_conversation <= $3
	ORDER BY next_run_at, id LIMIT $4
)
UPDATE tasks SET taken_until = $5 WHERE id IN (
	SELECT id FROM tasks WHERE id IN (SELECT id FROM fair) AND `+dueUnleased+` FOR UPDATE SKIP LOCKED)
RETURNING data`, p.Now.Time, store.NoBound(p.PerAgent), store.NoBound(p.PerConversation), clampLimit(p.Limit), p.Until.Time)
	store.SortTasks(ts)
	return ts, err
}

// dueUnleased is the condition on a tasks row of one due at $1 and not
// leased then.
const dueUnleased = `next_run_at <= $1 AND (taken_until IS NULL OR taken_until <= $1)`

// DeleteTask implements store.Store.
func (db *DB) DeleteTask(ctx context.Context, id string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM tasks WHERE id = $1`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return parley.Errorf(parley.ENOTFOUND, "task %s not found", id)
	}
	return nil
}

func (db *DB) queryTasks(ctx context.Context, q string, args ...any) ([]*parley.Task, error) {
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, store.ReadTask)
}

// advanceTask moves a task's next run within an append, ending the lease
// of the take that fired it; ECONFLICT if it no longer runs at a.From.
func advanceTask(ctx context.Context, tx pgx.Tx, a *parley.TaskAdvance) error {
	var data string
	err := tx.QueryRow(ctx, `SELECT data FROM tasks WHERE id = $1 AND next_run_at = $2 FOR UPDATE`, a.TaskID, a.From.Time).Scan(&data)
	if err == pgx.ErrNoRows {
		return parley.Errorf(parley.ECONFLICT, "task %s already ran at %s", a.TaskID, a.From.Format(parley.TimeLayout))
	}
	if err != nil {
		return err
	}
	var t parley.Task
	if err := json.Unmarshal([]byte(data), &t); err != nil {
		return err
	}
	t.NextRunAt = a.To
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE tasks SET data = $1, next_run_at = $2, taken_until = NULL WHERE id = $3`, string(b), a.To.Time, a.TaskID)
	return err
}
