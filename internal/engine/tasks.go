package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/store"
)

// Scheduled tasks are made, listed and removed by package schedule, whose
// rounds (schedule.Scheduler.RunTasks) call FireDueTasks: a firing writes
// into the task's conversation, as every command does.

// One round of the scheduler (one every poll) fires the due tasks longest
// overdue first, at most taskRoundPerAgent of one agent and
// taskRoundPerConversation of one conversation, taskRound in all: however
// many tasks one agent or conversation has, they cannot keep another's
// from firing on time.
const (
	taskRound                = 100
	taskRoundPerAgent        = 10
	taskRoundPerConversation = 1
)

// TaskLease is how long a round of the scheduler holds the due tasks it
// took (store.TakeDueTasks): no other node takes them meanwhile, and a task
// that fails to fire, or whose node dies before it fires, is taken again
// once it ends.
const TaskLease = 10 * time.Second

// FireDueTasks runs one round of the scheduler: it takes the tasks due now
// that no other node holds (for TaskLease), longest overdue first, at most
// taskRoundPerAgent of one agent and taskRoundPerConversation of one
// conversation, taskRound in all, and fires them. A task that fails to fire
// is logged and comes again once its lease ends; one whose conversation is
// closed, or whose schedule has ended, is removed. It returns an error only
// if the due tasks could not be taken.
func (e *Engine) FireDueTasks(ctx context.Context) error {
	now := e.opts.Now()
	due, err := e.store.TakeDueTasks(ctx, store.TakeDueTasksParams{Now: parley.NewTime(now), Until: parley.NewTime(now.Add(TaskLease)),
		Limit: taskRound, PerAgent: taskRoundPerAgent, PerConversation: taskRoundPerConversation})
	if err != nil {
		return err
	}
	for _, task := range due {
		if err := e.fire(ctx, task); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("firing a task failed", slog.String("task", task.ID), slog.Any("err", err))
		}
	}
	return nil
}

func (e *Engine) fire(ctx context.Context, task *parley.Task) error {
	runID, promptID := NewID(), NewID()
	retire := ""
	build := func(s conv.State) (conv.Command, error) {
		// Read again: after a lost race the task has moved on and this
		// firing must not happen twice.
		cur, err := e.store.GetTask(ctx, task.ID)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return conv.RunTask{}, nil
		}
		if err != nil {
			return nil, err
		}
		next, err := schedule.NextRun(*cur, cur.NextRunAt.Time, e.opts.Now())
		if s.Closed || parley.ErrorCode(err) == parley.EINVALIDVALUE {
			// It could never fire again: left, it would be due for ever.
			retire = "its conversation is closed"
			if err != nil {
				retire = parley.ErrorMessage(err)
			}
			return conv.RunTask{}, nil
		}
		if err != nil {
			return nil, err
		}
		due := cur.NextRunAt.Equal(task.NextRunAt.Time)
		return conv.RunTask{Task: *cur, RunID: runID, PromptID: promptID, Next: next, Due: due}, nil
	}
	d, _, err := e.decide(ctx, task.ConversationID, build, nil)
	if err == nil && d.Task != nil && len(d.Events) == 0 {
		e.opts.Logger.Warn("a task's firing was skipped: its conversation's prompt queue is full",
			slog.String("task", task.ID), slog.String("conversation", task.ConversationID))
	}
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		retire = "its conversation is gone"
	} else if err != nil || retire == "" {
		return err
	}
	err = e.store.DeleteTask(ctx, task.ID)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return nil // deleted already, or with its conversation
	}
	if err == nil {
		e.opts.Logger.Info("removed a task that can never run again", slog.String("task", task.ID), slog.String("why", retire))
	}
	return err
}
