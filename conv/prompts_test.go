package conv_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
)

func enqueue(id, mode string) conv.EnqueuePrompt {
	return conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: id, Content: "do " + id, Mode: mode, Window: time.Second}
}

func queueIDs(s conv.State) []string {
	var ids []string
	for _, p := range s.Queue {
		id := p.ID
		if p.Runner != "" {
			id += "*"
		}
		ids = append(ids, id)
	}
	return ids
}

func wantQueue(t *testing.T, sc *script, want ...string) {
	t.Helper()
	if got := queueIDs(sc.s); !equalKinds(got, want...) {
		t.Fatalf("queue = %v, want %v", got, want)
	}
}

func TestPromptQueueDispatchesOneAtATime(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(enqueue("p1", ""))
	sc.ok(enqueue("p2", conv.ModeFollowup))
	wantQueue(t, sc, "p1", "p2")
	d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
	if types(d.Events) != "message prompt.dispatched" {
		t.Fatalf("dispatch wrote %s", types(d.Events))
	}
	m := lastMessage(t, d)
	if m.ID != "p1" || m.Role != parley.RoleUser || m.AgentID != "human" || m.TurnID != "p1" || m.Finality != parley.FinalityTurn {
		t.Fatalf("the prompt's message = %+v", m)
	}
	wantQueue(t, sc, "p1*", "p2")
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p2"}); len(d.Events) != 0 {
		t.Fatal("a second prompt was dispatched while the first is active")
	}
	sc.ok(conv.CompletePrompt{Actor: conv.Actor{AgentID: "bot"}})
	if d := sc.ok(conv.CompletePrompt{Actor: conv.Actor{AgentID: "bot"}}); len(d.Events) != 0 {
		t.Fatal("a repeated complete advanced the queue again")
	}
	wantQueue(t, sc, "p2")
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p2"})
	wantQueue(t, sc, "p2*")
	checkInvariants(sc)
}

func TestPromptModes(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(enqueue("a", ""))
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do a"})
	sc.ok(enqueue("b", ""))
	sc.fail(enqueue("r", conv.ModeReject), parley.EBUSY)
	sc.ok(enqueue("s", conv.ModeSteer))
	wantQueue(t, sc, "a*", "s", "b") // steer goes first among the waiting
	sc.ok(conv.PromotePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "b"})
	wantQueue(t, sc, "a*", "b", "s")
	sc.ok(conv.WithdrawPrompt{Actor: conv.Actor{AgentID: "human"}, ID: "s"})
	wantQueue(t, sc, "a*", "b")
	sc.fail(conv.WithdrawPrompt{Actor: conv.Actor{AgentID: "human"}, ID: "a"}, parley.EBUSY)
	sc.fail(conv.WithdrawPrompt{Actor: conv.Actor{AgentID: "human"}, ID: "zz"}, parley.ENOTFOUND)
	sc.fail(enqueue("b", ""), parley.EBUSY)
	sc.fail(enqueue("x", "shout"), parley.EINVALIDVALUE)
	// A runner that disconnects puts its prompt back first; the user message is not written twice.
	sc.ok(conv.RequeuePrompt{Runner: "bot"})
	wantQueue(t, sc, "a", "b")
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do a"}); types(d.Events) != "prompt.dispatched" {
		t.Fatalf("re-dispatch wrote %s", types(d.Events))
	}
	checkInvariants(sc)
}

func TestCollectMergesWithinTheWindow(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(enqueue("c1", conv.ModeCollect))
	sc.advance(500 * time.Millisecond)
	sc.ok(enqueue("c2", conv.ModeCollect)) // merged into c1, window extended
	wantQueue(t, sc, "c1")
	if p := sc.s.Queue[0]; len(p.Parts) != 2 {
		t.Fatalf("c1 has %d parts", len(p.Parts))
	}
	sc.advance(900 * time.Millisecond)
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "x"}); len(d.Events) != 0 {
		t.Fatal("dispatched while still collecting")
	}
	sc.advance(200 * time.Millisecond)
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do c1\n\ndo c2"}); len(d.Events) != 2 {
		t.Fatal("not dispatched after the window")
	}
	checkInvariants(sc)
}

func TestDispatchWaitsForTheFloor(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(say("alice", parley.FinalityNone)) // alice holds turn 1
	sc.ok(enqueue("p", ""))
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p"}); len(d.Events) != 0 {
		t.Fatal("dispatched into another agent's open turn")
	}
	sc.ok(say("alice", parley.FinalityTurn))
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p"}); len(d.Events) != 2 {
		t.Fatal("not dispatched once the floor was free")
	}
}

func TestTaskRunQueuesAPromptInItsExchange(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	task := parley.Task{ID: "t1", AgentID: "cron", Prompt: "daily report", NextRunAt: parley.NewTime(epoch0)}
	if d := sc.ok(conv.RunTask{Task: task, RunID: "run-1", PromptID: "p1", Due: false}); len(d.Events) != 0 {
		t.Fatal("a firing that is no longer due wrote something")
	}
	d := sc.ok(conv.RunTask{Task: task, RunID: "run-1", PromptID: "p1", Next: parley.NewTime(epoch0.Add(time.Hour)), Due: true})
	if types(d.Events) != "task.run prompt.queued" || d.Task == nil || d.Task.TaskID != "t1" || !d.Task.From.Equal(epoch0) {
		t.Fatalf("firing: %s, advance %+v", types(d.Events), d.Task)
	}
	m := lastMessage(t, sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "daily report"}))
	if m.ID != "p1" || m.TurnID != "run-1" || m.AgentID != "cron" {
		t.Fatalf("the task's prompt message = id %s turnId %s agent %s", m.ID, m.TurnID, m.AgentID)
	}
	checkInvariants(sc)
}

func TestAResponseAnswersItsPrompt(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	p := enqueue("p1", "")
	p.Channel = &parley.Channel{Type: "slack", ID: "C1"}
	sc.ok(p)
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
	r := say("bot", parley.FinalityNone)
	r.Streaming, r.Parts = true, nil
	m := lastMessage(t, sc.ok(r))
	if m.ReplyTo != "p1" || m.TurnID != "p1" || m.Depth != 1 || m.Channel == nil || m.Channel.ID != "C1" {
		t.Fatalf("the response = replyTo %q turnId %q depth %d channel %+v", m.ReplyTo, m.TurnID, m.Depth, m.Channel)
	}
	// Another agent's message is not an answer to bot's prompt.
	other := say("alice", parley.FinalityNone)
	if _, err := sc.do(other); err == nil {
		t.Fatal("alice wrote into bot's open turn")
	}
}
