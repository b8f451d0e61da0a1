package conv_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestTurnLeaseRules: an open turn lapses a lease after its last write,
// or after its owner was last seen with a runner if that is later, and
// never while its owner has a runner; the tombstone is a turn.aborted of
// reason timeout in the owner's name that closes the turn.
func TestTurnLeaseRules(t *testing.T) {
	t.Parallel()
	sc := build(t, parley.PolicyFree, nil, say("carol", parley.FinalityNone), 30*time.Second, say("carol", parley.FinalityNone))
	expire := conv.ExpireTurn{Lease: time.Minute}
	sc.advance(59 * time.Second)
	if d := sc.ok(expire); len(d.Events) != 0 {
		t.Fatalf("a turn written to 59s ago lapsed: %s", types(d.Events))
	}
	sc.advance(time.Second)
	if d := sc.ok(conv.ExpireTurn{Lease: time.Minute, Runners: []string{"carol"}}); len(d.Events) != 0 {
		t.Fatal("a turn whose owner has a runner lapsed")
	}
	if d := sc.ok(conv.ExpireTurn{Lease: time.Minute, Since: sc.now.Add(-time.Second)}); len(d.Events) != 0 {
		t.Fatal("a turn whose owner was seen with a runner a second ago lapsed")
	}
	d := sc.ok(expire)
	if types(d.Events) != "turn.aborted" || d.Events[0].AgentID != "carol" || d.Events[0].Finality != parley.FinalityTurn ||
		string(d.Events[0].Data) != `{"turn":1,"reason":"timeout"}` || sc.s.Open != nil {
		t.Fatalf("the lapse wrote %s %s", types(d.Events), d.Events[0].Data)
	}
	if d := sc.ok(expire); len(d.Events) != 0 {
		t.Fatal("a lapse with no open turn wrote something")
	}
	sc.ok(say("bob", parley.FinalityTurn)) // the floor is free
}

// TestExplainWaitingPrompts: the asker's own open turn holds nothing
// back; another agent's does, and says until when while its owner has no
// runner.
func TestExplainWaitingPrompts(t *testing.T) {
	t.Parallel()
	sc := build(t, parley.PolicyFree, nil, say("human", parley.FinalityNone), enqueue("p1", ""))
	if q := sc.s.Explain([]string{"bot"}, sc.now, time.Minute, time.Time{}); q[0].WaitingOn != nil {
		t.Fatalf("a prompt behind its asker's own turn waits on %+v", q[0].WaitingOn)
	}
	if d := sc.ok(conv.DispatchPrompt{Runner: "bot", Content: "q"}); types(d.Events) != "message prompt.dispatched" || d.Events[0].Finality != parley.FinalityTurn {
		t.Fatalf("dispatch wrote %s", types(d.Events))
	}
	sc.ok(conv.CompletePrompt{Actor: actor("bot")})
	sc.ok(say("carol", parley.FinalityNone))
	p2 := enqueue("p2", "")
	p2.To = "bot"
	sc.ok(p2)
	q := sc.s.Explain([]string{"bot"}, sc.now, time.Minute, time.Time{})
	w := q[0].WaitingOn
	if w == nil || w.Reason != conv.WaitTurn || w.AgentID != "carol" || w.Until == nil || !w.Until.Equal(sc.now.Add(time.Minute)) {
		t.Fatalf("p2 waits on %+v", w)
	}
	if q := sc.s.Explain([]string{"bot", "carol"}, sc.now, time.Minute, time.Time{}); q[0].WaitingOn == nil || q[0].WaitingOn.Until != nil {
		t.Fatal("a turn whose owner has a runner says when it lapses")
	}
	if sc.s.Queue[0].WaitingOn != nil {
		t.Fatal("Explain changed the state's queue")
	}
}
