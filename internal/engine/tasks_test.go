package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// clock is a settable time for the tests that schedule.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestTaskFiresOnceAcrossEngines runs the scheduler on two engines over one
// store (two nodes, or a restart racing the old process): each scheduled run
// fires exactly once, and its prompt's exchange is the run's id.
func TestTaskFiresOnceAcrossEngines(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	b := setup(t, engine.Options{Now: clk.Now})
	other := engine.New(b.db, engine.Options{Now: clk.Now})
	defer other.Close()
	id := b.conversation(t, parley.PolicyFree)
	task, err := b.eng.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "daily report", EveryMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go b.eng.RunTasks(ctx, 2*time.Millisecond)
	go other.RunTasks(ctx, 2*time.Millisecond)

	runs := func() []parley.Event {
		var out []parley.Event
		for _, e := range b.events(t, id) {
			if e.Type == conv.EventTaskRun {
				out = append(out, e)
			}
		}
		return out
	}
	for want := 1; want <= 4; want++ {
		clk.add(time.Minute)
		deadline := time.Now().Add(10 * time.Second)
		for len(runs()) < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond) // room for a duplicate to show up
		if n := len(runs()); n != want {
			t.Fatalf("after %d minutes the task ran %d times", want, n)
		}
	}
	// Each run queued one prompt whose exchange is the run.
	seen := map[string]bool{}
	for _, e := range b.events(t, id) {
		if e.Type == parley.EventPromptQueued {
			var p struct {
				TurnID string `json:"turnId"`
			}
			_ = json.Unmarshal(e.Data, &p)
			seen[p.TurnID] = true
		}
	}
	for _, r := range runs() {
		if !seen[r.TurnID] {
			t.Fatalf("run %s queued no prompt in its exchange", r.TurnID)
		}
	}
	if _, err := b.eng.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "x", Cron: "not a cron"}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("bad cron: %v", err)
	}
	if err := b.eng.DeleteTask(b.ctx, task.ID); err != nil {
		t.Fatal(err)
	}
}

// TestTaskScheduleKeepsItsPace: an interval counts from when a run was due,
// not from when it fired, so a late round does not push the schedule back;
// runs missed (a server that was down) fire once, and the next is the
// first on the schedule after now.
func TestTaskScheduleKeepsItsPace(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: t0}
	b := setup(t, engine.Options{Now: clk.Now})
	id := b.conversation(t, parley.PolicyFree)
	task, err := b.eng.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "report", EveryMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	next := func() time.Time {
		t.Helper()
		got, err := b.db.GetTask(b.ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.NextRunAt.Time
	}
	runs := func() int {
		n := 0
		for _, e := range b.events(t, id) {
			if e.Type == conv.EventTaskRun {
				n++
			}
		}
		return n
	}
	clk.add(61 * time.Second) // a round a second late
	if err := b.eng.FireDueTasks(b.ctx); err != nil {
		t.Fatal(err)
	}
	if n, at := runs(), next(); n != 1 || !at.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after a late round: %d runs, next at %s; want 1 and %s", n, at, t0.Add(2*time.Minute))
	}
	clk.add(10*time.Minute + 30*time.Second) // down for ten minutes
	for range 3 {
		if err := b.eng.FireDueTasks(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, at := runs(), next(); n != 2 || !at.Equal(t0.Add(12*time.Minute)) {
		t.Fatalf("after ten minutes down: %d runs, next at %s; want 2 and %s", n, at, t0.Add(12*time.Minute))
	}
}

// takesAtOnce is the store of one of several nodes whose scheduler rounds
// take their due tasks at the same moment: each take returns only once
// every node's has, so that none fires before all have taken. It counts
// the appends that fire a task (AppendParams.Task).
type takesAtOnce struct {
	store.Store
	taken   *sync.WaitGroup
	firings *atomic.Int64
}

func (s takesAtOnce) TakeDueTasks(ctx context.Context, p store.TakeDueTasksParams) ([]*parley.Task, error) {
	due, err := s.Store.TakeDueTasks(ctx, p)
	s.taken.Done()
	s.taken.Wait()
	return due, err
}

func (s takesAtOnce) Append(ctx context.Context, p store.AppendParams) error {
	if p.Task != nil {
		s.firings.Add(1)
	}
	return s.Store.Append(ctx, p)
}

// TestDueTasksAreTakenByOneNode: three nodes share one store and their
// schedulers take the due tasks at the same moment. Each due run fires
// exactly once, and only one node tries to fire it: the others never took
// it (before, every node read every due task and all but one lost the
// race to advance it, a wasted append each).
func TestDueTasksAreTakenByOneNode(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	b := setup(t, engine.Options{Now: clk.Now, Shared: true})
	const nodes, tasks = 3, 12
	var ids []string
	for i := range tasks {
		id := b.conversation(t, parley.PolicyFree, "alice")
		if _, err := b.eng.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: fmt.Sprint("cron", i), Prompt: "report", EveryMs: 60_000}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	clk.add(2 * time.Minute) // one run due (a missed run fires once)
	var taken, fired sync.WaitGroup
	taken.Add(nodes)
	firings := new(atomic.Int64)
	for range nodes {
		node := engine.New(takesAtOnce{Store: b.db, taken: &taken, firings: firings}, engine.Options{Now: clk.Now, Shared: true})
		defer node.Close()
		fired.Go(func() {
			if err := node.FireDueTasks(b.ctx); err != nil {
				t.Error(err)
			}
		})
	}
	fired.Wait()
	for _, id := range ids {
		runs := 0
		for _, e := range b.events(t, id) {
			if e.Type == conv.EventTaskRun {
				runs++
			}
		}
		if runs != 1 {
			t.Fatalf("conversation %s: the task ran %d times, want once", id, runs)
		}
	}
	if n := firings.Load(); n != tasks {
		t.Fatalf("%d appends fired %d due runs: nodes raced for the same tasks", n, tasks)
	}
}
