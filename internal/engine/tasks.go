package engine

import (
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
	"github.com/robfig/cron/v3"
)

// The bounds of a task's interval, in milliseconds.
const (
	MinTaskEveryMs = 1000                      // one second
	MaxTaskEveryMs = 366 * 24 * 60 * 60 * 1000 // 366 days
)

// DefaultMaxTasksPerAgent is how many scheduled tasks one agent may have
// when Options.MaxTasksPerAgent is not set.
const DefaultMaxTasksPerAgent = 100

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

// maxCronLen bounds a cron expression.
const maxCronLen = 256

// taskCron reads the one cron dialect of tasks: five fields, no
// descriptors (@every, @hourly, …); times are UTC.
var taskCron = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// CreateTask schedules a prompt in a conversation: every EveryMs
// milliseconds (MinTaskEveryMs to MaxTaskEveryMs), or by a five-field cron
// expression (UTC). It returns EINVALIDVALUE for a bad schedule or prompt,
// ENOTFOUND for an unknown conversation, ECLOSED for a closed one, and
// EBUSY for a taken id or an agent that has Options.MaxTasksPerAgent tasks
// already.
func (e *Engine) CreateTask(ctx context.Context, t parley.Task) (*parley.Task, error) {
	if t.ID == "" {
		t.ID = NewID()
	}
	switch {
	case !parley.ValidID(t.ID) || !parley.ValidID(t.AgentID):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "task and agent ids are 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)")
	case t.Prompt == "" || len(t.Prompt) > e.opts.Limits.MaxTextBytes:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a task needs a prompt of 1 to %d bytes", e.opts.Limits.MaxTextBytes)
	case strings.ContainsRune(t.Prompt, 0) || strings.ContainsRune(t.Cron, 0):
		return nil, parley.ErrNUL("the task")
	case !utf8.ValidString(t.Prompt):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "the task's prompt is not UTF-8")
	case (t.Cron == "") == (t.EveryMs == 0):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "give a task either cron or everyMs")
	case t.Cron == "" && (t.EveryMs < MinTaskEveryMs || t.EveryMs > MaxTaskEveryMs):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "everyMs must be from %d (one second) to %d (366 days), not %d", MinTaskEveryMs, MaxTaskEveryMs, t.EveryMs)
	}
	now := e.opts.Now()
	next, err := nextRun(t, now, now)
	if err != nil {
		return nil, err
	}
	v, err := e.Conversation(ctx, t.ConversationID)
	if err != nil {
		return nil, err
	}
	if v.Head.Closed {
		return nil, parley.Errorf(parley.ECLOSED, "conversation %s is closed: a task there could never run", t.ConversationID)
	}
	t.NextRunAt, t.CreatedAt = next, parley.NewTime(now)
	if err := e.store.CreateTask(ctx, store.CreateTaskParams{Task: &t, MaxPerAgent: e.opts.MaxTasksPerAgent}); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tasks returns every scheduled task.
func (e *Engine) Tasks(ctx context.Context) ([]*parley.Task, error) { return e.store.ListTasks(ctx) }

// DeleteTask unschedules a task. It returns ENOTFOUND.
func (e *Engine) DeleteTask(ctx context.Context, id string) error { return e.store.DeleteTask(ctx, id) }

// parseCron reads a task's cron expression: five fields (minute, hour, day
// of month, month, day of week) in UTC and nothing else, so that no
// descriptor (@every 1ms) and no time zone prefix (TZ=, CRON_TZ=) gets in.
func parseCron(spec string) (cron.Schedule, error) {
	if len(spec) > maxCronLen || len(strings.Fields(spec)) != 5 || strings.ContainsAny(spec, "@=") {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "cron %.300q is not five fields (minute hour day-of-month month day-of-week, in UTC, at most %d bytes); descriptors such as @every and @daily and TZ= or CRON_TZ= prefixes are not accepted", spec, maxCronLen)
	}
	s, err := taskCron.Parse(spec)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "cron %q: %v", spec, err)
	}
	return s, nil
}

// nextRun returns a task's first run after now. An interval counts from
// from (a new task's creation, or the run that fires), by whole intervals,
// so that a late round does not shift the schedule and runs missed fire
// once; a cron expression gives the next time it matches. A schedule that
// no longer fires (a cron expression that matches nothing in the next five
// years) is EINVALIDVALUE.
func nextRun(t parley.Task, from, now time.Time) (parley.Time, error) {
	if t.Cron == "" {
		every := time.Duration(t.EveryMs) * time.Millisecond // at most 366 days: no overflow
		next := from.Add(every)
		if !next.After(now) {
			next = from.Add((now.Sub(from)/every + 1) * every)
		}
		return parley.NewTime(next), nil
	}
	s, err := parseCron(t.Cron)
	if err != nil {
		return parley.Time{}, err
	}
	next := s.Next(now.UTC())
	if next.IsZero() {
		return parley.Time{}, parley.Errorf(parley.EINVALIDVALUE, "cron %q does not fire in the next five years", t.Cron)
	}
	return parley.NewTime(next), nil
}

// RunTasks fires due tasks until ctx ends: one round (FireDueTasks) every
// poll. Of several nodes, one takes each due task; and each firing appends
// task.run and queues the prompt in the same transaction that moves the
// task to its next run, so a firing happens once, whatever the number of
// nodes and restarts. A firing into a full
// prompt queue is skipped: the task only moves to its next run.
func (e *Engine) RunTasks(ctx context.Context, poll time.Duration) {
	tick(ctx, poll, func() {
		if err := e.FireDueTasks(ctx); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("reading due tasks failed", slog.Any("err", err))
		}
	})
}

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
		next, err := nextRun(*cur, cur.NextRunAt.Time, e.opts.Now())
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
