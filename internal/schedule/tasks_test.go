package schedule_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/teststore"
)

// clock is a time the tests move on.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// bundle is a store, an engine over it and a Scheduler of its tasks, on
// one clock.
type bundle struct {
	db    store.Store
	eng   *engine.Engine
	tasks *schedule.Scheduler
	ctx   context.Context
}

func setup(t *testing.T, clk *clock) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	db := teststore.Open(t)
	eng := engine.New(db, engine.Options{Now: clk.Now})
	t.Cleanup(eng.Close)
	return &bundle{db: db, eng: eng, tasks: schedule.New(db, eng, schedule.Options{Now: clk.Now}), ctx: ctx}
}

// testAgents take part in the conversations these tests make.
var testAgents = []string{"a", "b", "c", "alice", "bob", "bot", "human", "worker", "writer"}

// conversation makes a free conversation of testAgents.
func (b *bundle) conversation(t *testing.T) string {
	t.Helper()
	v, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Participants: testAgents, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	return v.Conversation.ID
}

// logged returns the events of conversation id of type typ.
func (b *bundle) logged(t *testing.T, id, typ string) []parley.Event {
	t.Helper()
	all, err := b.db.ReadEvents(b.ctx, store.ReadEventsParams{ConversationID: id, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(e parley.Event) bool { return e.Type != typ })
}

// TestTaskFiresOnceAcrossEngines runs the scheduler on two engines over one
// store (two nodes, or a restart racing the old process): each scheduled run
// fires exactly once, and its prompt's exchange is the run's id.
func TestTaskFiresOnceAcrossEngines(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	b := setup(t, clk)
	other := engine.New(b.db, engine.Options{Now: clk.Now})
	defer other.Close()
	id := b.conversation(t)
	task, err := b.tasks.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "daily report", EveryMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go b.tasks.RunTasks(ctx, 2*time.Millisecond)
	go schedule.New(b.db, other, schedule.Options{Now: clk.Now}).RunTasks(ctx, 2*time.Millisecond)

	runs := func() []parley.Event {
		return b.logged(t, id, conv.EventTaskRun)
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
	for _, e := range b.logged(t, id, parley.EventPromptQueued) {
		var p struct {
			TurnID string `json:"turnId"`
		}
		_ = json.Unmarshal(e.Data, &p)
		seen[p.TurnID] = true
	}
	for _, r := range runs() {
		if !seen[r.TurnID] {
			t.Fatalf("run %s queued no prompt in its exchange", r.TurnID)
		}
	}
	if _, err := b.tasks.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "x", Cron: "not a cron"}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("bad cron: %v", err)
	}
	if err := b.tasks.DeleteTask(b.ctx, task.ID); err != nil {
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
	clk := newClock(t0)
	b := setup(t, clk)
	id := b.conversation(t)
	task, err := b.tasks.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "report", EveryMs: 60_000})
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
		return len(b.logged(t, id, conv.EventTaskRun))
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
