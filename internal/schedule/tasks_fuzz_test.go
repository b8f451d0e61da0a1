package schedule_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/sqlite"
)

// FuzzTaskSchedule feeds arbitrary cron expressions and intervals to
// CreateTask, on a real store, and to the schedule reader. It must never
// panic. A schedule is accepted exactly when it is an interval of
// MinTaskEveryMs to MaxTaskEveryMs, or a five-field cron with no
// descriptor or time zone that fires; anything else is refused with
// invalid_value and writes no task. A task accepted is stored as given and
// runs first one interval (or at the cron's next minute) after now, and
// every schedule accepted runs next after now: an interval on its pace (a
// whole number of intervals after the run that was due), a cron at a whole
// minute.
func FuzzTaskSchedule(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "*/5 * * * *", "@every 1ms", "@hourly", "TZ=UTC 0 9 * * *", "CRON_TZ=UTC 0 9 * * *",
		"0 0 9 * * *", "0 0 30 2 *", "0 0 29 2 1", "61 * * * *", "", "* * * * ?", "0 9 * * MON-FRI", "0 0 1 JAN *"} {
		f.Add(s, int64(0), int64(0))
	}
	f.Add("", int64(1000), int64(5_000))
	f.Add("", int64(schedule.MaxTaskEveryMs), int64(-1))
	f.Add("", int64(60_000), int64(1<<62))
	for _, ms := range []int64{999, schedule.MaxTaskEveryMs + 1, -1, -1000, 1 << 62, math.MaxInt64, math.MinInt64, 18446744073710} {
		f.Add("", ms, int64(0))
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	eng := engine.New(db, engine.Options{Now: func() time.Time { return t0 }})
	f.Cleanup(func() { eng.Close(); db.Close() })
	e := schedule.New(db, eng, schedule.Options{Now: func() time.Time { return t0 }})
	v, err := eng.CreateConversation(ctx, parley.Conversation{Participants: []string{"alice"}})
	if err != nil {
		f.Fatal(err)
	}
	conversation := v.Conversation.ID
	f.Fuzz(func(t *testing.T, spec string, everyMs, lateMs int64) {
		// A failing input leaves its task behind, and the fuzzer then
		// shrinks it in the same process: start from no task, so that what
		// is reported is what failed.
		if left, err := e.Tasks(ctx); err == nil {
			for _, task := range left {
				_ = e.DeleteTask(ctx, task.ID)
			}
		}
		every := everyMs
		if spec != "" {
			every = 0
		}
		task, err := e.CreateTask(ctx, parley.Task{ConversationID: conversation, AgentID: "alice", Prompt: "report", Cron: spec, EveryMs: every})
		stored, lerr := e.Tasks(ctx)
		if lerr != nil {
			t.Fatal(lerr)
		}
		if err != nil {
			if parley.ErrorCode(err) != parley.EINVALIDVALUE || len(stored) != 0 {
				t.Fatalf("cron %q, everyMs %d: refused with %v, and %d tasks stored; want invalid_value and none", spec, every, err, len(stored))
			}
		} else {
			if len(stored) != 1 || stored[0].ID != task.ID || stored[0].Cron != spec || stored[0].EveryMs != every || !stored[0].NextRunAt.After(t0) {
				t.Fatalf("cron %q, everyMs %d: accepted, and stored %+v", spec, every, stored)
			}
			if err := e.DeleteTask(ctx, task.ID); err != nil {
				t.Fatal(err)
			}
		}
		if spec != "" {
			_, perr := schedule.ParseCron(spec)
			if perr != nil {
				if parley.ErrorCode(perr) != parley.EINVALIDVALUE || err == nil {
					t.Fatalf("cron %q refused with %v, and CreateTask answered %v", spec, perr, err)
				}
				return
			}
			if len(strings.Fields(spec)) != 5 || strings.ContainsAny(spec, "@=") {
				t.Fatalf("cron %q was accepted", spec)
			}
			next, nerr := schedule.NextRun(parley.Task{Cron: spec}, t0, t0)
			if (nerr == nil) != (err == nil) {
				t.Fatalf("cron %q: its next run is %v, and CreateTask answered %v", spec, nerr, err)
			}
			if nerr != nil {
				return // it never fires
			}
			if !next.After(t0) || next.Sub(t0) > 5*366*24*time.Hour || next.Second() != 0 || next.Nanosecond() != 0 || !task.NextRunAt.Equal(next.Time) {
				t.Fatalf("cron %q next runs at %s (the task at %s)", spec, next, task.NextRunAt)
			}
			return
		}
		inRange := everyMs >= schedule.MinTaskEveryMs && everyMs <= schedule.MaxTaskEveryMs
		if inRange != (err == nil) {
			t.Fatalf("everyMs %d (from %d to %d): CreateTask answered %v", everyMs, schedule.MinTaskEveryMs, schedule.MaxTaskEveryMs, err)
		}
		if !inRange {
			return
		}
		interval := time.Duration(everyMs) * time.Millisecond
		if !task.NextRunAt.Equal(t0.Add(interval)) {
			t.Fatalf("every %s, made at %s: first runs at %s", interval, t0, task.NextRunAt)
		}
		// The run due at t0 fires late by lateMs (up to about ten years).
		now := t0.Add(time.Duration(lateMs%(10*366*24*3600*1000)) * time.Millisecond)
		if now.Before(t0) {
			now = t0
		}
		next, err := schedule.NextRun(parley.Task{EveryMs: everyMs}, t0, now)
		if err != nil || !next.After(now) || next.Sub(now) > interval || next.Sub(t0)%interval != 0 {
			t.Fatalf("every %s, due at %s, fired at %s: next %s, %v", interval, t0, now, next, err)
		}
	})
}
