package conv_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
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
		if p.Aborted {
			id += "!"
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
	wantQueue(t, sc, "a*!", "s", "b") // steer goes first among the waiting, and aborts a
	sc.ok(conv.PromotePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "b"})
	wantQueue(t, sc, "a*!", "b", "s")
	sc.ok(conv.WithdrawPrompt{Actor: conv.Actor{AgentID: "human"}, ID: "s"})
	wantQueue(t, sc, "a*!", "b")
	sc.fail(conv.WithdrawPrompt{Actor: conv.Actor{AgentID: "human"}, ID: "a"}, parley.EBUSY)
	sc.fail(conv.WithdrawPrompt{Actor: conv.Actor{AgentID: "human"}, ID: "zz"}, parley.ENOTFOUND)
	sc.fail(enqueue("b", ""), parley.EBUSY)
	sc.fail(enqueue("x", "shout"), parley.EINVALIDVALUE)
	// The steer aborted a: its runner leaving ends it instead of putting it back.
	sc.ok(conv.RequeuePrompt{Runner: "bot"})
	wantQueue(t, sc, "b")
	// A runner that disconnects puts its prompt back first; the user message is not written twice.
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do b"})
	sc.ok(enqueue("c", ""))
	sc.ok(conv.RequeuePrompt{Runner: "bot"})
	wantQueue(t, sc, "b", "c")
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do b"}); types(d.Events) != "prompt.dispatched" {
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

// TestSteerAbortsTheAnswer: a steer aborts the prompt being answered; the
// runner's aborted (a canceled finalize of its answer) ends that prompt, the
// steer goes next, and a late complete naming the old prompt changes nothing.
func TestSteerAbortsTheAnswer(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(enqueue("p1", ""))
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
	st := startStream(t, sc, "bot", "r1")
	if st.msg.ReplyTo != "p1" {
		t.Fatalf("the answer replies to %q", st.msg.ReplyTo)
	}
	st.text("Let me")
	if d := sc.ok(enqueue("p2", conv.ModeSteer)); types(d.Events) != "prompt.queued prompt.aborted" {
		t.Fatalf("steer wrote %s", types(d.Events))
	}
	wantQueue(t, sc, "p1*!", "p2")
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p2"}); len(d.Events) != 0 {
		t.Fatal("the steer was dispatched before the aborted answer ended")
	}
	d := sc.ok(conv.FinalizeMessage{Actor: actor("bot"), MessageID: "r1", Reason: parley.FinishCanceled, EndsPrompt: true, Known: st.known()})
	if types(d.Events) != "message.updated prompt.canceled" {
		t.Fatalf("aborted wrote %s", types(d.Events))
	}
	wantQueue(t, sc, "p2")
	wantGuidance(t, sc, "", parley.GuidanceStartTurn, sc.s.LastTurn+1) // free policy, no runner known to the rules
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p2"})
	wantQueue(t, sc, "p2*")
	if d := sc.ok(conv.CompletePrompt{Actor: actor("bot"), ID: "p1"}); len(d.Events) != 0 {
		t.Fatalf("a late complete of p1 wrote %s", types(d.Events))
	}
	wantQueue(t, sc, "p2*")
	if d := sc.ok(conv.CompletePrompt{Actor: actor("bot"), ID: "p2"}); types(d.Events) != "prompt.completed" {
		t.Fatalf("complete of p2 wrote %s", types(d.Events))
	}
	checkInvariants(sc)
}

// TestAbortPrompt: a stop marks the answer aborted once; an aborted answer
// ends with aborted (even with no message), or canceled when its runner
// leaves, and is never dispatched again.
func TestAbortPrompt(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.fail(conv.AbortPrompt{Actor: actor("human")}, parley.ENOTFOUND)
	sc.ok(enqueue("p1", ""))
	sc.ok(enqueue("p2", ""))
	sc.fail(conv.AbortPrompt{Actor: actor("human")}, parley.ENOTFOUND) // waiting is not answering
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
	if d := sc.ok(conv.AbortPrompt{Actor: actor("human")}); types(d.Events) != "prompt.aborted" {
		t.Fatalf("stop wrote %s", types(d.Events))
	}
	if d := sc.ok(conv.AbortPrompt{Actor: actor("human")}); len(d.Events) != 0 {
		t.Fatalf("a second stop wrote %s", types(d.Events))
	}
	if d := sc.ok(conv.CompletePrompt{Actor: actor("bot"), Aborted: true}); types(d.Events) != "prompt.canceled" {
		t.Fatalf("aborted with no message wrote %s", types(d.Events))
	}
	wantQueue(t, sc, "p2")
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p2"})
	sc.ok(conv.AbortPrompt{Actor: actor("human")})
	if d := sc.ok(conv.RequeuePrompt{Runner: "bot"}); types(d.Events) != "prompt.canceled" {
		t.Fatalf("the runner of an aborted prompt left: %s", types(d.Events))
	}
	wantQueue(t, sc)
	checkInvariants(sc)
}

// TestRevertAbortsTheAnswer: reverting an answer while it streams aborts the
// prompt it answers and closes the turn, so the queue and the floor move on.
func TestRevertAbortsTheAnswer(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(enqueue("p1", ""))
	sc.ok(enqueue("p2", ""))
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
	st := startStream(t, sc, "bot", "r1")
	st.text("half an answer")
	d := sc.ok(conv.Revert{Actor: actor("human"), MessageID: "r1", Known: []string{"r1"}})
	if types(d.Events) != "messages.removed prompt.aborted turn.aborted" || sc.s.Open != nil {
		t.Fatalf("revert wrote %s, open %+v", types(d.Events), sc.s.Open)
	}
	// The runner answers the abort; its message is gone, so nothing else changes.
	if d := sc.ok(conv.CompletePrompt{Actor: actor("bot"), Aborted: true}); types(d.Events) != "prompt.canceled" {
		t.Fatalf("aborted wrote %s", types(d.Events))
	}
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p2"})
	wantQueue(t, sc, "p2*")
	checkInvariants(sc)
}

// TestPromptQueueIsBounded: the queue holds at most MaxQueuedPrompts
// prompts, waiting or being answered, a collect prompt counting once per
// prompt merged into it. Past it every mode is refused with busy, saying
// how long the queue is, and a task's firing is skipped (the task moves on,
// nothing is written); once a prompt ends there is room again.
func TestPromptQueueIsBounded(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.env.Limits.MaxQueuedPrompts = 3
	sc.ok(enqueue("p1", ""))
	sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
	sc.ok(enqueue("c1", conv.ModeCollect))
	sc.ok(enqueue("c2", conv.ModeCollect)) // merged into c1: one entry, two prompts
	wantQueue(t, sc, "p1*", "c1")
	for _, mode := range []string{"", conv.ModeFollowup, conv.ModeSteer, conv.ModeCollect} {
		e := sc.fail(enqueue("p9", mode), parley.EBUSY)
		if e.Details["queueLength"] != 3 || e.Details["maxQueueLength"] != 3 || !strings.Contains(e.Message, "full") {
			t.Fatalf("mode %q past the limit: %+v", mode, e)
		}
	}
	task := parley.Task{ID: "t1", AgentID: "cron", Prompt: "daily", NextRunAt: parley.NewTime(epoch0)}
	next := parley.NewTime(epoch0.Add(time.Hour))
	d := sc.ok(conv.RunTask{Task: task, RunID: "run-1", PromptID: "tp1", Next: next, Due: true})
	if len(d.Events) != 0 || d.Task == nil || d.Task.TaskID != "t1" || !d.Task.From.Equal(epoch0) || !d.Task.To.Equal(next.Time) {
		t.Fatalf("a firing into a full queue: %s, advance %+v", types(d.Events), d.Task)
	}
	sc.ok(conv.CompletePrompt{Actor: conv.Actor{AgentID: "bot"}})
	sc.ok(enqueue("p2", ""))
	wantQueue(t, sc, "c1", "p2")
	sc.fail(enqueue("p3", ""), parley.EBUSY)
	checkInvariants(sc)
}

// TestCollectNeverMergesPastTheTextLimit: collect prompts whose texts
// together would be too large for one message start a new prompt instead,
// so that every prompt can be written and the queue never stalls.
func TestCollectNeverMergesPastTheTextLimit(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.env.Limits.MaxTextBytes = 100
	big := func(id string, n int) conv.EnqueuePrompt {
		p := enqueue(id, conv.ModeCollect)
		p.Content = strings.Repeat("x", n)
		return p
	}
	sc.ok(big("c1", 60))
	sc.ok(big("c2", 30)) // 60 + 2 + 30 = 92: merged
	wantQueue(t, sc, "c1")
	sc.ok(big("c3", 30)) // 92 + 2 + 30 = 124: a new prompt
	wantQueue(t, sc, "c1", "c3")
	if sc.s.Queue[0].Bytes != 92 || sc.s.Queue[1].Bytes != 30 {
		t.Fatalf("sizes %d, %d", sc.s.Queue[0].Bytes, sc.s.Queue[1].Bytes)
	}
	sc.advance(2 * time.Second)
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: strings.Repeat("x", 92)}); types(d.Events) != "message prompt.dispatched" {
		t.Fatalf("the merged prompt was not dispatched: %s", types(d.Events))
	}
	checkInvariants(sc)
}

// TestSteerStopsOnlyWhatItsAskerMay: a steer aborts the answer being given
// only if its asker may stop that answer (its asker, its runner, the
// conversation's owner, an admin), as a stop would; otherwise it waits for
// the answer to end, first in line, and aborts nothing.
func TestSteerStopsOnlyWhatItsAskerMay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		who    conv.Actor
		aborts bool
	}{
		{conv.Actor{AgentID: "human"}, true},            // the asker
		{conv.Actor{AgentID: "bot"}, true},              // the runner answering
		{conv.Actor{AgentID: "ops", Admin: true}, true}, // an admin
		{conv.Actor{AgentID: "other"}, false},           // another member
		{conv.Actor{AgentID: "bob"}, false},             // another participant
		{conv.Actor{AgentID: "owner"}, true},            // the conversation's owner
	} {
		sc := newScript(t, parley.PolicyFree)
		sc.s.Conversation.Members = []string{"human", "other", "owner"}
		sc.s.Conversation.Participants = []string{"bot", "bob"}
		sc.s.Conversation.CreatedBy = "owner"
		sc.ok(enqueue("p1", ""))
		sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "do p1"})
		steer := enqueue("s", conv.ModeSteer)
		steer.Actor = c.who
		if err := conv.Authorize(sc.s, steer); err != nil {
			t.Fatalf("%s may not steer: %v", c.who.AgentID, err)
		}
		d := sc.ok(steer)
		want, queue := "prompt.queued", "p1*"
		if c.aborts {
			want, queue = "prompt.queued prompt.aborted", "p1*!"
		}
		if got := types(d.Events); got != want {
			t.Errorf("a steer by %s wrote %s, want %s", c.who.AgentID, got, want)
		}
		wantQueue(t, sc, queue, "s")
		if !c.aborts {
			stop := conv.AbortPrompt{Actor: c.who}
			if err := conv.Authorize(sc.s, stop); parley.ErrorCode(err) != parley.EFORBIDDEN {
				t.Errorf("%s may not steer the answer away, yet may stop it: %v", c.who.AgentID, err)
			}
		}
	}
}
