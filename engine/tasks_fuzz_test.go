package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
)

// FuzzTaskSchedule feeds the schedule reader arbitrary cron expressions and
// intervals. It must never panic; a cron it accepts is five fields with no
// descriptor or time zone, and every schedule it accepts runs next after
// now: an interval on its pace (a whole number of intervals after from), a
// cron at a whole minute.
func FuzzTaskSchedule(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "*/5 * * * *", "@every 1ms", "@hourly", "TZ=UTC 0 9 * * *", "CRON_TZ=UTC 0 9 * * *",
		"0 0 9 * * *", "0 0 30 2 *", "0 0 29 2 1", "61 * * * *", "", "* * * * ?", "0 9 * * MON-FRI", "0 0 1 JAN *"} {
		f.Add(s, int64(0), int64(0))
	}
	f.Add("", int64(1000), int64(5_000))
	f.Add("", int64(MaxTaskEveryMs), int64(-1))
	f.Add("", int64(60_000), int64(1<<62))
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec string, everyMs, lateMs int64) {
		if spec != "" {
			_, err := parseCron(spec)
			if err != nil {
				if parley.ErrorCode(err) != parley.EINVALIDVALUE {
					t.Fatalf("cron %q refused with %v", spec, err)
				}
				return
			}
			if len(strings.Fields(spec)) != 5 || strings.ContainsAny(spec, "@=") {
				t.Fatalf("cron %q was accepted", spec)
			}
			next, err := nextRun(parley.Task{Cron: spec}, t0, t0)
			if err != nil {
				return // it never fires
			}
			if !next.After(t0) || next.Sub(t0) > 5*366*24*time.Hour || next.Second() != 0 || next.Nanosecond() != 0 {
				t.Fatalf("cron %q next runs at %s", spec, next)
			}
			return
		}
		if everyMs < MinTaskEveryMs || everyMs > MaxTaskEveryMs {
			return // CreateTask refuses it
		}
		// The run due at t0 fires late by lateMs (up to about ten years).
		now := t0.Add(time.Duration(lateMs%(10*366*24*3600*1000)) * time.Millisecond)
		if now.Before(t0) {
			now = t0
		}
		next, err := nextRun(parley.Task{EveryMs: everyMs}, t0, now)
		every := time.Duration(everyMs) * time.Millisecond
		if err != nil || !next.After(now) || next.Sub(now) > every || next.Sub(t0)%every != 0 {
			t.Fatalf("every %s, due at %s, fired at %s: next %s, %v", every, t0, now, next, err)
		}
	})
}
