package api_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/schedule"
)

func TestTasksEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	for body, code := range map[string]string{
		`{"conversationId":"` + id + `","prompt":"x","cron":"every day"}`:                "invalid_value",
		`{"conversationId":"` + id + `","prompt":"x","cron":"0 9 * * *","everyMs":1000}`: "invalid_value",
		`{"conversationId":"` + id + `","prompt":"x","everyMs":10}`:                      "invalid_value",
		`{"conversationId":"` + id + `","prompt":"","everyMs":1000}`:                     "invalid_value",
		`{"conversationId":"nope","prompt":"x","everyMs":1000}`:                          "not_found",
	} {
		r := b.do("POST", "/v1/tasks", b.alice, body)
		if r.code() != code {
			t.Fatalf("%s: %d %s, want %s", body, r.status, r.raw, code)
		}
	}
	r := b.do("POST", "/v1/tasks", b.alice, map[string]any{"conversationId": id, "prompt": "standup", "cron": "0 9 * * 1-5"})
	b.want(r, 201, "")
	if r.body["agentId"] != "alice" || r.body["nextRunAt"] == nil {
		t.Fatalf("task = %s", r.raw)
	}
	tid := r.body["id"].(string)
	r = b.do("GET", "/v1/tasks", b.viewer, nil)
	if len(r.body["tasks"].([]any)) != 1 {
		t.Fatalf("tasks = %s", r.raw)
	}
	b.want(b.do("DELETE", "/v1/tasks/"+tid, b.viewer, nil), 403, "forbidden")
	if r := b.do("DELETE", "/v1/tasks/"+tid, b.alice, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	b.want(b.do("DELETE", "/v1/tasks/"+tid, b.alice, nil), 404, "not_found")
}

// roundClock is the time of scheduler rounds driven by a test: set puts it
// at a round's start, and while it ticks each reading is a millisecond
// later than the one before, as time goes by while a round fires, so that
// a schedule that counts from when it fired rather than from when it was
// due drifts.
type roundClock struct {
	mu    sync.Mutex
	now   time.Time
	ticks bool
}

func (c *roundClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	if c.ticks {
		c.now = c.now.Add(time.Millisecond)
	}
	return t
}

func (c *roundClock) set(t time.Time, ticks bool) {
	c.mu.Lock()
	c.now, c.ticks = t, ticks
	c.mu.Unlock()
}

// runs counts a conversation's task.run events.
func (b *bundle) runs(id string) int {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/events?limit=1000", b.viewer, nil)
	b.want(r, 200, "")
	n := 0
	for _, e := range r.body["events"].([]any) {
		if e.(map[string]any)["type"] == "task.run" {
			n++
		}
	}
	return n
}

// TestTasksFireFairly: 500 tasks every second in one conversation (ten
// agents' worth) and one agent's tasks every second in 20 more
// conversations cannot keep alice's task, every second in her own
// conversation, from running on time: over 15 rounds of the scheduler (one
// a second, driven by a clock the test sets) it runs at least 14 times.
// The flooded conversation runs at most once a round, the agent with many
// conversations at most 10 times.
func TestTasksFireFairly(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := &roundClock{now: t0}
	b := setup(t, engine.Options{Now: clk.Now}, api.Options{})
	flood, mine := b.conversation(), b.conversation()
	task := func(token, agent, conv string) {
		t.Helper()
		body := map[string]any{"conversationId": conv, "prompt": "now", "everyMs": 1000}
		if agent != "" {
			body["agentId"] = agent
		}
		b.want(b.do("POST", "/v1/tasks", token, body), 201, "")
	}
	for i := range 500 {
		task(b.admin, fmt.Sprintf("bot%d", i%10), flood)
	}
	var spread []string
	for range 20 {
		spread = append(spread, b.conversation())
		task(b.admin, "spreader", spread[len(spread)-1])
	}
	task(b.alice, "", mine)

	const rounds = 15
	for i := 1; i <= rounds; i++ {
		clk.set(t0.Add(time.Duration(i)*time.Second), true)
		if err := b.eng.FireDueTasks(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.set(t0.Add(rounds*time.Second), false)
	if n := b.runs(mine); n < rounds-1 {
		t.Fatalf("alice's task every second ran %d times in %d rounds of the scheduler", n, rounds)
	}
	if n := b.runs(flood); n < 1 || n > rounds {
		t.Fatalf("the flooded conversation ran %d tasks in %d rounds, want 1 to %d", n, rounds, rounds)
	}
	spreaderRuns := 0
	for _, c := range spread {
		spreaderRuns += b.runs(c)
	}
	if spreaderRuns < 1 || spreaderRuns > 10*rounds {
		t.Fatalf("the agent with 20 conversations ran %d tasks in %d rounds, want 1 to %d", spreaderRuns, rounds, 10*rounds)
	}
}

// TestTaskBounds: an agent may have MaxTasksPerAgent tasks; one more is 409
// busy and writes nothing, whoever names the agent, until one is deleted;
// other agents are not counted with it. A task in a closed conversation is
// 409 conversation_closed, and a task whose conversation closes later is
// removed by the round that fires it, instead of staying due for ever.
func TestTaskBounds(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := &roundClock{now: t0}
	b := setupTasks(t, engine.Options{Now: clk.Now}, schedule.Options{MaxTasksPerAgent: 3}, api.Options{})
	id := b.conversation()
	body := func(agent string) map[string]any {
		return map[string]any{"conversationId": id, "prompt": "p", "cron": "0 9 * * *", "agentId": agent}
	}
	var ids []string
	for range 3 {
		r := b.do("POST", "/v1/tasks", b.alice, body(""))
		b.want(r, 201, "")
		ids = append(ids, r.body["id"].(string))
	}
	before := b.do("GET", "/v1/tasks", b.viewer, nil).raw
	b.want(b.do("POST", "/v1/tasks", b.alice, body("")), 409, "busy")
	b.want(b.do("POST", "/v1/tasks", b.admin, body("alice")), 409, "busy")
	if after := b.do("GET", "/v1/tasks", b.viewer, nil).raw; string(after) != string(before) {
		t.Fatalf("a refused task was written:\n%s\n%s", before, after)
	}
	b.want(b.do("POST", "/v1/tasks", b.bob, body("")), 201, "")
	if r := b.do("DELETE", "/v1/tasks/"+ids[0], b.alice, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	b.want(b.do("POST", "/v1/tasks", b.alice, body("")), 201, "")

	// Close the conversation: no new task, and the old ones go when due.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": "bye", "finality": "conversation"}), 201, "")
	b.want(b.do("POST", "/v1/tasks", b.bob, body("")), 409, "conversation_closed")
	// A round handles one task of a conversation: four rounds for four.
	for i := range 4 {
		clk.set(t0.Add(24*time.Hour+time.Duration(i)*time.Second), false)
		if err := b.eng.FireDueTasks(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r := b.do("GET", "/v1/tasks", b.viewer, nil); len(r.body["tasks"].([]any)) != 0 {
		t.Fatalf("the tasks of a closed conversation are left after four rounds: %s", r.raw)
	}
}
