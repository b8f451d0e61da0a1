package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/schedule"
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

// scheduler returns a Scheduler of the bundle's tasks, fired by its
// engine, on clk's time.
func (b *bundle) scheduler(clk *clock) *schedule.Scheduler {
	return schedule.New(b.db, b.eng, schedule.Options{Now: clk.Now})
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
	sch := b.scheduler(clk)
	const nodes, tasks = 3, 12
	var ids []string
	for i := range tasks {
		id := b.conversation(t, parley.PolicyFree, "alice")
		if _, err := sch.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: fmt.Sprint("cron", i), Prompt: "report", EveryMs: 60_000}); err != nil {
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
