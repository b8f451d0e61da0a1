package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/robfig/cron/v3"
)

// CreateTask schedules a prompt in a conversation: every EveryMs
// milliseconds (at least 1000), or by a five-field cron expression (UTC). It
// returns EINVALIDVALUE for a bad schedule or prompt and ENOTFOUND for an
// unknown conversation.
func (e *Engine) CreateTask(ctx context.Context, t parley.Task) (*parley.Task, error) {
	if t.ID == "" {
		t.ID = NewID()
	}
	switch {
	case !parley.ValidID(t.ID) || !parley.ValidID(t.AgentID):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "task and agent ids are 1-128 characters of A-Z a-z 0-9 . _ : -")
	case t.Prompt == "" || len(t.Prompt) > e.opts.Limits.MaxTextBytes:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a task needs a prompt of 1 to %d bytes", e.opts.Limits.MaxTextBytes)
	case (t.Cron == "") == (t.EveryMs == 0):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "give a task either cron or everyMs")
	case t.Cron == "" && t.EveryMs < 1000:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "everyMs must be at least 1000")
	}
	if _, err := e.Conversation(ctx, t.ConversationID); err != nil {
		return nil, err
	}
	now := e.opts.Now()
	next, err := nextRun(t, now)
	if err != nil {
		return nil, err
	}
	t.NextRunAt, t.CreatedAt = next, parley.NewTime(now)
	if err := e.store.CreateTask(ctx, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tasks returns every scheduled task.
func (e *Engine) Tasks(ctx context.Context) ([]*parley.Task, error) { return e.store.ListTasks(ctx) }

// DeleteTask unschedules a task. It returns ENOTFOUND.
func (e *Engine) DeleteTask(ctx context.Context, id string) error { return e.store.DeleteTask(ctx, id) }

// nextRun returns a task's first run after now.
func nextRun(t parley.Task, now time.Time) (parley.Time, error) {
	if t.Cron == "" {
		return parley.NewTime(now.Add(time.Duration(t.EveryMs) * time.Millisecond)), nil
	}
	s, err := cron.ParseStandard(t.Cron)
	if err != nil {
		return parley.Time{}, parley.Errorf(parley.EINVALIDVALUE, "cron %q: %v", t.Cron, err)
	}
	return parley.NewTime(s.Next(now.UTC())), nil
}

// RunTasks fires due tasks until ctx ends, checking every poll. Each firing
// appends task.run and queues the prompt in the same transaction that moves
// the task to its next run, so a firing happens once, whatever the number
// of nodes and restarts.
func (e *Engine) RunTasks(ctx context.Context, poll time.Duration) {
	pollDue(ctx, e, poll, "due tasks", e.store.DueTasks, func(task *parley.Task) {
		if err := e.fire(ctx, task); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("firing a task failed", slog.String("task", task.ID), slog.Any("err", err))
		}
	})
}

func (e *Engine) fire(ctx context.Context, task *parley.Task) error {
	runID, promptID := NewID(), NewID()
	build := func(conv.State) (conv.Command, error) {
		// Read again: after a lost race the task has moved on and this
		// firing must not happen twice.
		cur, err := e.store.GetTask(ctx, task.ID)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return conv.RunTask{}, nil
		}
		if err != nil {
			return nil, err
		}
		next, err := nextRun(*cur, e.opts.Now())
		if err != nil {
			return nil, err
		}
		due := cur.NextRunAt.Equal(task.NextRunAt.Time)
		return conv.RunTask{Task: *cur, RunID: runID, PromptID: promptID, Next: next, Due: due}, nil
	}
	_, _, err := e.decide(ctx, task.ConversationID, build, nil)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return e.store.DeleteTask(ctx, task.ID) // its conversation is gone
	}
	return err
}
