// Package schedule keeps the scheduled tasks: prompts that a conversation
// is sent every so often, by an interval or by a cron expression. A
// Scheduler makes (checking the schedule and the bounds), lists and
// removes them, and runs the rounds that fire the due ones; firing a task
// writes into its conversation, which the engine does
// (engine.Engine.FireDueTasks). NextRun is the rule of when a task runs.
package schedule

import (
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tick"
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

// maxCronLen bounds a cron expression.
const maxCronLen = 256

// taskCron reads the one cron dialect of tasks: five fields, no
// descriptors (@every, @hourly, …); times are UTC.
var taskCron = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Store is where tasks are kept (store.Store has it).
type Store interface {
	// CreateTask stores a task; EBUSY for a taken id or an agent at p.MaxPerAgent.
	CreateTask(ctx context.Context, p store.CreateTaskParams) error
	// ListTasks returns every task, oldest first.
	ListTasks(ctx context.Context) ([]*parley.Task, error)
	// DeleteTask removes a task. It returns ENOTFOUND.
	DeleteTask(ctx context.Context, id string) error
}

// Engine is what a Scheduler needs of the write path (engine.Engine has it).
type Engine interface {
	// Require applies a rule to a conversation's current state (a task is
	// made only in an open one); ENOTFOUND for an unknown conversation.
	Require(ctx context.Context, id string, rule func(conv.State) error) error
	// Limits bounds a task's prompt as a message's text.
	Limits() conv.Limits
	// FireDueTasks runs one round: it fires the tasks due now.
	FireDueTasks(ctx context.Context) error
}

// Options configure a Scheduler. Zero values take the defaults.
type Options struct {
	// MaxTasksPerAgent bounds the scheduled tasks of one agent (default
	// DefaultMaxTasksPerAgent); CreateTask over it is EBUSY.
	MaxTasksPerAgent int
	// Now returns the current time (default time.Now); tests may replace it.
	Now func() time.Time
	// Logger receives the rounds that failed (default: none).
	Logger *slog.Logger
}

// Scheduler makes, lists and removes scheduled tasks, and fires them.
type Scheduler struct {
	store Store
	eng   Engine
	opts  Options
}

// New returns a Scheduler of the tasks in st, fired by eng.
func New(st Store, eng Engine, opts Options) *Scheduler {
	if opts.MaxTasksPerAgent <= 0 {
		opts.MaxTasksPerAgent = DefaultMaxTasksPerAgent
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{store: st, eng: eng, opts: opts}
}

// CreateTask schedules a prompt in a conversation: every EveryMs
// milliseconds (MinTaskEveryMs to MaxTaskEveryMs), or by a five-field cron
// expression (UTC). It returns EINVALIDVALUE for a bad schedule or prompt,
// ENOTFOUND for an unknown conversation, ECLOSED for a closed one, and
// EBUSY for a taken id or an agent that has Options.MaxTasksPerAgent tasks
// already.
func (s *Scheduler) CreateTask(ctx context.Context, t parley.Task) (*parley.Task, error) {
	if t.ID == "" {
		t.ID = uuid.Must(uuid.NewV7()).String() // time-ordered, as every id the server makes
	}
	maxText := s.eng.Limits().MaxTextBytes
	switch {
	case !parley.ValidID(t.ID) || !parley.ValidID(t.AgentID):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "task and agent ids are 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)")
	case t.Prompt == "" || len(t.Prompt) > maxText:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a task needs a prompt of 1 to %d bytes", maxText)
	case strings.ContainsRune(t.Prompt, 0) || strings.ContainsRune(t.Cron, 0):
		return nil, parley.ErrNUL("the task")
	case !utf8.ValidString(t.Prompt):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "the task's prompt is not UTF-8")
	case (t.Cron == "") == (t.EveryMs == 0):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "give a task either cron or everyMs")
	case t.Cron == "" && (t.EveryMs < MinTaskEveryMs || t.EveryMs > MaxTaskEveryMs):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "everyMs must be from %d (one second) to %d (366 days), not %d", MinTaskEveryMs, MaxTaskEveryMs, t.EveryMs)
	}
	now := s.opts.Now()
	next, err := NextRun(t, now, now)
	if err != nil {
		return nil, err
	}
	err = s.eng.Require(ctx, t.ConversationID, func(st conv.State) error {
		if st.Closed {
			return parley.Errorf(parley.ECLOSED, "conversation %s is closed: a task there could never run", t.ConversationID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.NextRunAt, t.CreatedAt = next, parley.NewTime(now)
	if err := s.store.CreateTask(ctx, store.CreateTaskParams{Task: &t, MaxPerAgent: s.opts.MaxTasksPerAgent}); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tasks returns every scheduled task.
func (s *Scheduler) Tasks(ctx context.Context) ([]*parley.Task, error) { return s.store.ListTasks(ctx) }

// DeleteTask unschedules a task. It returns ENOTFOUND.
func (s *Scheduler) DeleteTask(ctx context.Context, id string) error {
	return s.store.DeleteTask(ctx, id)
}

// RunTasks fires due tasks until ctx ends: one round (the engine's
// FireDueTasks) every poll. Of several nodes, one takes each due task; and
// each firing appends task.run and queues the prompt in the same
// transaction that moves the task to its next run, so a firing happens
// once, whatever the number of nodes and restarts. A firing into a full
// prompt queue is skipped: the task only moves to its next run.
func (s *Scheduler) RunTasks(ctx context.Context, poll time.Duration) {
	tick.Every(ctx, poll, func() {
		if err := s.eng.FireDueTasks(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("reading due tasks failed", slog.Any("err", err))
		}
	})
}

// parseCron reads a task's cron expression: five fields (minute, hour, day
// of month, month, day of week) in UTC and nothing else, so that no
// descriptor (@every 1ms) and no time zone prefix (TZ=, CRON_TZ=) gets in.
func parseCron(spec string) (cron.Schedule, error) {
	if len(spec) > maxCronLen || len(strings.Fields(spec)) != 5 || strings.ContainsAny(spec, "@=") {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "cron %.300q is not five fields (minute hour day-of-month month day-of-week, in UTC, at most %d bytes); descriptors such as @every and @daily and TZ= or CRON_TZ= prefixes are not accepted", spec, maxCronLen)
	}
	if i := strings.IndexFunc(spec, notCron); i >= 0 {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "cron %q holds %q, which no cron field has (digits, names, * , - / ?)", spec, spec[i:i+1])
	}
	s, err := taskCron.Parse(spec)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "cron %q: %v", spec, err)
	}
	return s, nil
}

// notCron reports whether r is a character no cron field has: the parser
// reads some others (bytes that are not UTF-8 among them) as part of a
// range, and a task's text must be UTF-8.
func notCron(r rune) bool {
	switch {
	case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		return false
	}
	return !strings.ContainsRune(" \t*,-/?", r)
}

// NextRun returns a task's first run after now. An interval counts from
// from (a new task's creation, or the run that fires), by whole intervals,
// so that a late round does not shift the schedule and runs missed fire
// once; a cron expression gives the next time it matches. A schedule that
// no longer fires (a cron expression that matches nothing in the next five
// years) is EINVALIDVALUE.
func NextRun(t parley.Task, from, now time.Time) (parley.Time, error) {
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
