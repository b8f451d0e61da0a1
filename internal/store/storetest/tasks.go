package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testTasksPerAgent: an agent's tasks stop at the bound, even when many
// creations race, and another agent's do not count; a deleted task frees
// its place.
func testTasksPerAgent(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	agent, other := "a-"+uuid.NewString(), "b-"+uuid.NewString()
	task := func(agent string) *parley.Task {
		return &parley.Task{ID: uuid.NewString(), ConversationID: id, AgentID: agent, Prompt: "p", EveryMs: 60000, NextRunAt: t0, CreatedAt: t0}
	}
	const max = 5
	var wg sync.WaitGroup
	errs := make(chan error, 4*max)
	for range 4 * max {
		wg.Go(func() { errs <- s.CreateTask(ctx(t), store.CreateTaskParams{Task: task(agent), MaxPerAgent: max}) })
	}
	wg.Wait()
	close(errs)
	created := 0
	for err := range errs {
		switch parley.ErrorCode(err) {
		case "":
			created++
		case parley.EBUSY:
		default:
			t.Fatalf("a creation over the bound: %v", err)
		}
	}
	if created != max {
		t.Fatalf("%d racing creations made %d tasks, want the bound %d", 4*max, created, max)
	}
	wantCode(t, s.CreateTask(ctx(t), store.CreateTaskParams{Task: task(agent), MaxPerAgent: max}), parley.EBUSY)
	if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task(other), MaxPerAgent: max}); err != nil {
		t.Fatalf("another agent's task: %v", err)
	}
	var mine []*parley.Task
	all, err := s.ListTasks(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if x.AgentID == agent {
			mine = append(mine, x)
		}
	}
	if len(mine) != max {
		t.Fatalf("the agent has %d tasks, want %d", len(mine), max)
	}
	if err := s.DeleteTask(ctx(t), mine[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task(agent), MaxPerAgent: max}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

// testDueTasksFair checks TakeDueTasks against its definition, on tasks of four
// agents in three conversations (ties in time included) and several
// bounds: of the due tasks, the longest overdue PerAgent of each agent,
// then of those PerConversation of each conversation, Limit in all, longest
// overdue first.
func testDueTasksFair(t *testing.T, s store.Store) {
	// Long before t0, where no other test has tasks due.
	base := parley.NewTime(t0.AddDate(-200, 0, 0))
	convs := []string{newConversation(t, s), newConversation(t, s), newConversation(t, s)}
	agents := []string{}
	for i := range 4 {
		agents = append(agents, fmt.Sprintf("fair%d-%s", i, uuid.NewString()))
	}
	var tasks []*parley.Task
	for i := range 40 {
		// Agent 0 has most tasks, and the oldest ones, in conversation 0.
		a, c := agents[min(i%7, 3)], convs[(i/3)%3]
		if i < 12 {
			a, c = agents[0], convs[0]
		}
		at := parley.NewTime(base.Add(time.Duration(i/2) * time.Second))
		task := &parley.Task{ID: fmt.Sprintf("%s-%02d", uuid.NewString()[:8], i), ConversationID: c, AgentID: a, Prompt: "p", EveryMs: 1000, NextRunAt: at, CreatedAt: t0}
		if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task}); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
		t.Cleanup(func() { _ = s.DeleteTask(context.Background(), task.ID) }) // not due for the rounds of the tests after
	}
	slices.SortFunc(tasks, func(x, y *parley.Task) int {
		return cmp.Or(x.NextRunAt.Compare(y.NextRunAt.Time), cmp.Compare(x.ID, y.ID))
	})
	want := func(p store.TakeDueTasksParams) []string {
		perAgent, perConv, out := map[string]int{}, map[string]int{}, []string{}
		var kept []*parley.Task
		for _, x := range tasks {
			if x.NextRunAt.After(p.Now.Time) {
				continue
			}
			if perAgent[x.AgentID]++; p.PerAgent == 0 || perAgent[x.AgentID] <= p.PerAgent {
				kept = append(kept, x)
			}
		}
		for _, x := range kept {
			if perConv[x.ConversationID]++; (p.PerConversation == 0 || perConv[x.ConversationID] <= p.PerConversation) && len(out) < p.Limit {
				out = append(out, x.ID)
			}
		}
		return out
	}
	for _, p := range []store.TakeDueTasksParams{
		{Limit: 100, PerAgent: 10, PerConversation: 1}, {Limit: 100, PerAgent: 2, PerConversation: 1},
		{Limit: 2, PerAgent: 10, PerConversation: 1}, {Limit: 100}, {Limit: 7}, {Limit: 100, PerConversation: 2},
		{Limit: 100, PerAgent: 3}, {Limit: 100, PerAgent: 1, PerConversation: 1},
	} {
		for _, now := range []time.Duration{0, 5 * time.Second, time.Hour} {
			// A lease that ends at base, before any round here: every
			// round sees every task due.
			p.Now, p.Until = parley.NewTime(base.Add(now)), base
			due, err := s.TakeDueTasks(ctx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, x := range due {
				got = append(got, x.ID)
			}
			if w := want(p); !slices.Equal(got, w) {
				t.Fatalf("TakeDueTasks(%+v at base+%s) = %v, want %v", p, now, got, w)
			}
		}
	}
}

// testTakeDueTasksOnce: rounds that take due tasks at once, as the
// schedulers of several nodes on one database do, take each task once:
// none is taken by two, none is missed.
func testTakeDueTasksOnce(t *testing.T, s store.Store) {
	// Long before t0 and after the fair rounds' tasks: only these are due.
	due := parley.NewTime(t0.AddDate(-100, 0, 0))
	const n = 60
	mine := map[string]bool{}
	for i := range n {
		task := &parley.Task{ID: uuid.NewString(), ConversationID: newConversation(t, s), AgentID: fmt.Sprintf("a%d", i%7), Prompt: "p",
			EveryMs: 60000, NextRunAt: due, CreatedAt: t0}
		if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task}); err != nil {
			t.Fatal(err)
		}
		mine[task.ID] = true
		t.Cleanup(func() { _ = s.DeleteTask(context.Background(), task.ID) })
	}
	taken := takeAtOnce(t, func() ([]string, error) {
		got, err := s.TakeDueTasks(ctx(t), store.TakeDueTasksParams{Now: due, Until: parley.NewTime(due.Add(time.Hour)), Limit: 7, PerAgent: 2, PerConversation: 1})
		var ids []string
		for _, x := range got {
			ids = append(ids, x.ID)
		}
		return ids, err
	})
	if len(taken) != n {
		t.Fatalf("%d of %d due tasks taken", len(taken), n)
	}
	for id, k := range taken {
		if !mine[id] || k != 1 {
			t.Fatalf("task %s (this test's: %v) taken %d times", id, mine[id], k)
		}
	}
}

func testTasks(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	task := &parley.Task{ID: uuid.NewString(), ConversationID: id, AgentID: "a", Prompt: "report", EveryMs: 60000, NextRunAt: t0, CreatedAt: t0}
	if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.CreateTask(ctx(t), store.CreateTaskParams{Task: task}), parley.EBUSY)
	got, err := s.GetTask(ctx(t), task.ID)
	if err != nil || got.Prompt != "report" || !got.NextRunAt.Equal(t0.Time) {
		t.Fatalf("task = %+v, %v", got, err)
	}
	// A round takes it, and holds it until its lease ends.
	taken := func(now, until time.Time) bool {
		t.Helper()
		due, err := s.TakeDueTasks(ctx(t), store.TakeDueTasksParams{Now: parley.NewTime(now), Until: parley.NewTime(until), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(due, func(x *parley.Task) bool { return x.ID == task.ID })
	}
	if !taken(t0.Time, t0.Add(time.Hour)) {
		t.Fatal("a task due at t0 is not taken at t0")
	}
	if taken(t0.Time, t0.Time) {
		t.Fatal("a task another round holds is taken again")
	}
	// A firing moves the task on with its events; a second firing of the same run fails whole.
	next := parley.NewTime(t0.Add(time.Minute))
	adv := &parley.TaskAdvance{TaskID: task.ID, From: t0, To: next}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Task: adv, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "a")}, Task: adv, State: []byte(`{}`)})
	wantCode(t, err, parley.ECONFLICT)
	if events, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 10}); len(events) != 2 {
		t.Fatalf("a repeated firing wrote events: %d", len(events))
	}
	got, _ = s.GetTask(ctx(t), task.ID)
	if !got.NextRunAt.Equal(next.Time) {
		t.Fatalf("next run %v, want %v", got.NextRunAt, next)
	}
	if taken(t0.Time, t0.Time) {
		t.Fatal("a task that fired is still due")
	}
	// The firing ended the lease: at its next run it is taken again, well
	// before the lease would have ended. Held by a round that never fires
	// it (its node died), it is taken again once that lease ends.
	if !taken(next.Time, next.Add(time.Minute)) {
		t.Fatal("a task that fired is not taken at its next run")
	}
	if taken(next.Add(30*time.Second), next.Add(30*time.Second)) {
		t.Fatal("a task is taken while a round holds it")
	}
	if !taken(next.Add(time.Minute), next.Add(time.Minute)) {
		t.Fatal("a task whose lease ended is not taken again")
	}
	all, err := s.ListTasks(ctx(t))
	if err != nil || !slices.ContainsFunc(all, func(x *parley.Task) bool { return x.ID == task.ID }) {
		t.Fatalf("ListTasks misses the task: %v", err)
	}
	if err := s.DeleteTask(ctx(t), task.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteTask(ctx(t), task.ID), parley.ENOTFOUND)
	_, err = s.GetTask(ctx(t), task.ID)
	wantCode(t, err, parley.ENOTFOUND)
}
