package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// CreateTask implements store.Store. The count and the insert run in the
// one writer's transaction, so no other creation comes between them.
func (db *DB) CreateTask(ctx context.Context, p store.CreateTaskParams) error {
	t := p.Task
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := store.CheckTask(t, data); err != nil {
		return err
	}
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if p.MaxPerAgent > 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE json_extract(data, '$.agentId') = ?`, t.AgentID).Scan(&n); err != nil {
				return err
			}
			if n >= p.MaxPerAgent {
				return store.TooManyTasks(t.AgentID, p.MaxPerAgent)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tasks (id, conversation_id, data, next_run_at, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.ID, t.ConversationID, data, formatTime(t.NextRunAt), formatTime(t.CreatedAt))
		if isUnique(err) {
			return parley.Errorf(parley.EBUSY, "task %s exists", t.ID)
		}
		return err
	})
}

// GetTask implements store.Store.
func (db *DB) GetTask(ctx context.Context, id string) (*parley.Task, error) {
	ts, err := db.queryTasks(ctx, `SELECT data FROM tasks WHERE id = ?`, id)
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

// TakeDueTasks implements store.Store: the one writer reads the due
// tasks and writes their lease in one transaction.
func (db *DB) TakeDueTasks(ctx context.Context, p store.TakeDueTasksParams) ([]*parley.Task, error) {
	var out []*parley.Task
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `
UPDATE tasks SET taken_until = ?1 WHERE id IN (
	SELECT id FROM (
		SELECT id, next_run_at,
			ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY next_run_at, id) AS in_conversation
		FROM (
			SELECT id, next_run_at, conversation_id,
				ROW_NUMBER() OVER (PARTITION BY json_extract(data, '$.agentId') ORDER BY next_run_at, id) AS of_agent
			FROM tasks WHERE next_run_at <= ?2 AND (taken_until IS NULL OR taken_until <= ?2)
		) WHERE of_agent <= ?3
	) WHERE in_conversation <= ?4
	ORDER BY next_run_at, id LIMIT ?5)
RETURNING data`, formatTime(p.Until), formatTime(p.Now), store.NoBound(p.PerAgent), store.NoBound(p.PerConversation), clampLimit(p.Limit))
		if err != nil {
			return err
		}
		out, err = scanTasks(rows)
		return err
	})
	store.SortTasks(out)
	return out, err
}

// DeleteTask implements store.Store.
func (db *DB) DeleteTask(ctx context.Context, id string) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return parley.Errorf(parley.ENOTFOUND, "task %s not found", id)
		}
		return nil
	})
}

func (db *DB) queryTasks(ctx context.Context, q string, args ...any) ([]*parley.Task, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanTasks(rows)
}

// scanTasks reads rows of one column, a task's data, and closes them.
func scanTasks(rows *sql.Rows) ([]*parley.Task, error) {
	defer rows.Close()
	return store.Collect(rows, store.ReadTask)
}

// advanceTask moves a task's next run within an append, ending the lease
// of the round that fired it; ECONFLICT if it no longer runs at a.From.
func advanceTask(ctx context.Context, tx *sql.Tx, a *parley.TaskAdvance) error {
	var data []byte
	err := tx.QueryRowContext(ctx, `SELECT data FROM tasks WHERE id = ? AND next_run_at = ?`, a.TaskID, formatTime(a.From)).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return parley.Errorf(parley.ECONFLICT, "task %s already ran at %s", a.TaskID, formatTime(a.From))
	}
	if err != nil {
		return err
	}
	var t parley.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return err
	}
	t.NextRunAt = a.To
	if data, err = json.Marshal(t); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE tasks SET data = ?, next_run_at = ?, taken_until = NULL WHERE id = ?`, data, formatTime(a.To), a.TaskID)
	return err
}
