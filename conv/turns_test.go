package conv_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
)

func TestSeed003Examples(t *testing.T) {
	t.Parallel()
	t.Run("simple back-and-forth", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		for i, agent := range []string{"agent-a", "agent-b", "agent-a"} {
			d := sc.ok(say(agent, parley.FinalityTurn))
			if d.Result.Turn != i+1 {
				t.Fatalf("message %d by %s in turn %d, want %d", i, agent, d.Result.Turn, i+1)
			}
		}
	})
	t.Run("multi-step processing stays in one turn", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		for i := 0; i < 3; i++ {
			if d := sc.ok(say("agent-a", parley.FinalityNone)); d.Result.Turn != 1 {
				t.Fatalf("step %d in turn %d", i, d.Result.Turn)
			}
		}
		sc.ok(say("agent-a", parley.FinalityTurn))
		if d := sc.ok(say("agent-b", parley.FinalityNone)); d.Result.Turn != 2 {
			t.Fatalf("agent-b in turn %d, want 2", d.Result.Turn)
		}
	})
	t.Run("interrupted and resumed keeps the turn", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("agent-a", parley.FinalityNone))
		sc.advance(time.Hour) // agent-a is called again much later
		if d := sc.ok(say("agent-a", parley.FinalityTurn)); d.Result.Turn != 1 {
			t.Fatalf("resumed write in turn %d, want 1", d.Result.Turn)
		}
		wantGuidance(t, sc, "", parley.GuidanceStartTurn, 2)
	})
}

func TestPreconditions(t *testing.T) {
	t.Parallel()
	t.Run("explicit T+1 while T is open names T", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(starting(say("a", parley.FinalityNone), 1))
		e := sc.fail(starting(say("b", parley.FinalityNone), 2), parley.EPRECONDITION)
		if !strings.Contains(e.Message, "turn 1 is open") || e.Head == nil || e.Head.OpenTurn.Turn != 1 {
			t.Fatalf("error %q head %+v", e.Message, e.Head)
		}
	})
	t.Run("starting a turn that is not lastTurn+1", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityTurn))
		sc.fail(starting(say("b", parley.FinalityNone), 5), parley.EPRECONDITION)
		sc.fail(starting(say("b", parley.FinalityNone), 1), parley.EPRECONDITION)
		sc.ok(starting(say("b", parley.FinalityNone), 2))
	})
	t.Run("append to a closed turn", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityTurn))
		sc.fail(continuing(say("a", parley.FinalityNone), 1), parley.EPRECONDITION)
	})
	t.Run("continue an open turn of another agent", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityNone))
		e := sc.fail(continuing(say("b", parley.FinalityNone), 1), parley.ETURNCONFLICT)
		if !strings.Contains(e.Message, "a") {
			t.Fatalf("error %q does not name the owner", e.Message)
		}
	})
	t.Run("start and continue own turn", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(starting(say("a", parley.FinalityNone), 1))
		sc.fail(starting(say("a", parley.FinalityNone), 1), parley.EPRECONDITION) // already open: continue it or reset it
		sc.ok(continuing(say("a", parley.FinalityTurn), 1))
	})
	t.Run("expectTurn must be positive", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.fail(starting(say("a", parley.FinalityNone), 0), parley.EINVALIDVALUE)
	})
}

func TestOwnership(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(say("a", parley.FinalityNone))
	e := sc.fail(say("b", parley.FinalityNone), parley.ETURNCONFLICT)
	if !strings.Contains(e.Message, "owned by a") || e.Head.OpenTurn.Owner != "a" {
		t.Fatalf("error %q head %+v", e.Message, e.Head)
	}
	sc.ok(say("a", parley.FinalityTurn))
	if d := sc.ok(say("b", parley.FinalityNone)); d.Result.Turn != 2 {
		t.Fatalf("b opened turn %d, want 2", d.Result.Turn)
	}
}

func TestFinality(t *testing.T) {
	t.Parallel()
	t.Run("write after conversation finality", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityNone))
		sc.ok(say("a", parley.FinalityConversation))
		if !sc.s.Closed || sc.s.Open != nil {
			t.Fatalf("state after close: %+v", sc.s)
		}
		sc.fail(say("b", parley.FinalityNone), parley.ECLOSED)
		sc.fail(conv.ClaimTurn{Actor: conv.Actor{AgentID: "b"}}, parley.ECLOSED)
		sc.fail(conv.AbortTurn{Actor: conv.Actor{AgentID: "a"}}, parley.ECLOSED)
		if g := sc.s.Guidance(sc.now); g != nil {
			t.Fatalf("guidance after close: %+v", g)
		}
	})
	t.Run("a trace cannot close a turn", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.fail(conv.PostTrace{Actor: conv.Actor{AgentID: "a"}, Finality: parley.FinalityTurn}, parley.EINVALID)
		sc.fail(conv.PostTrace{Actor: conv.Actor{AgentID: "a"}, Finality: parley.FinalityConversation}, parley.EINVALID)
		sc.fail(conv.PostTrace{Actor: conv.Actor{AgentID: "a"}, Finality: "forever"}, parley.EINVALIDVALUE)
		sc.fail(conv.PostTrace{Actor: conv.Actor{AgentID: "a"}, ID: "bad id"}, parley.EINVALIDVALUE)
		sc.fail(conv.PostTrace{Actor: conv.Actor{AgentID: "a"}, Payload: []byte(`{"x":`)}, parley.EINVALID)
		if d := sc.ok(conv.PostTrace{Actor: conv.Actor{AgentID: "a"}, Payload: []byte(`{"t":1}`)}); d.Result.Turn != 1 || sc.s.Open == nil {
			t.Fatalf("trace did not open turn 1: %+v", d.Result)
		}
	})
	t.Run("system messages stay in turn 0", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityTurn))
		sys := conv.PostMessage{Actor: conv.Actor{AgentID: "ops", Admin: true}, Role: parley.RoleSystem, Parts: []parley.Part{{Type: parley.PartText, Text: "maintenance"}}}
		d := sc.ok(sys)
		if d.Result.Turn != 0 || sc.s.LastTurn != 1 || sc.s.Open != nil {
			t.Fatalf("system message in turn %d, lastTurn %d, open %+v", d.Result.Turn, sc.s.LastTurn, sc.s.Open)
		}
		sc.ok(say("a", parley.FinalityNone)) // an open turn does not stop a system message
		if d := sc.ok(sys); d.Result.Turn != 0 || sc.s.Open.Turn != 2 {
			t.Fatalf("system message during turn 2: turn %d", d.Result.Turn)
		}
		notAdmin := sys
		notAdmin.Admin = false
		sc.fail(notAdmin, parley.EFORBIDDEN)
		closing := sys
		closing.Finality = parley.FinalityTurn
		sc.fail(closing, parley.EINVALIDVALUE)
		closing.Finality = parley.FinalityConversation
		sc.ok(closing)
		if !sc.s.Closed {
			t.Fatal("a system message with conversation finality did not close the conversation")
		}
	})
}

func TestClaims(t *testing.T) {
	t.Parallel()
	claim := func(agent string) conv.ClaimTurn {
		return conv.ClaimTurn{Actor: conv.Actor{AgentID: agent}, TTL: 10 * time.Second}
	}
	t.Run("first claim wins, the loser gets 409", func(t *testing.T) {
		sc := newScript(t, parley.PolicyRoundRobin, "a", "b")
		d := sc.ok(claim("b"))
		if d.Result.Turn != 1 || !d.Result.Claimed || d.Result.Claim.AgentID != "b" {
			t.Fatalf("claim = %+v", d.Result)
		}
		sc.fail(claim("a"), parley.ECLAIMCONFLICT)
		sc.fail(say("a", parley.FinalityNone), parley.ECLAIMCONFLICT)
		wantGuidance(t, sc, "b", parley.GuidanceStartTurn, 1)
	})
	t.Run("the same agent re-claims and extends", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		first := sc.ok(claim("a")).Result.Claim.ExpiresAt
		sc.advance(5 * time.Second)
		again := sc.ok(claim("a")).Result.Claim.ExpiresAt
		if !again.After(first.Time) {
			t.Fatalf("re-claim did not extend: %v then %v", first, again)
		}
	})
	t.Run("an expired claim lets another agent in", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(claim("a"))
		sc.advance(11 * time.Second)
		if sc.s.Head(sc.now).Claim != nil {
			t.Fatal("head shows an expired claim")
		}
		d := sc.ok(say("b", parley.FinalityNone))
		if types(d.Events) != "claim.expired message" || d.Result.Turn != 1 {
			t.Fatalf("events = %s, turn %d", types(d.Events), d.Result.Turn)
		}
	})
	t.Run("ExpireClaim writes only after the TTL", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(claim("a"))
		if d := sc.ok(conv.ExpireClaim{}); len(d.Events) != 0 {
			t.Fatalf("early expiry wrote %s", types(d.Events))
		}
		sc.advance(10 * time.Second)
		if d := sc.ok(conv.ExpireClaim{}); types(d.Events) != "claim.expired" || sc.s.Claim != nil {
			t.Fatalf("expiry wrote %q, claim %+v", types(d.Events), sc.s.Claim)
		}
		if d := sc.ok(conv.ExpireClaim{}); len(d.Events) != 0 {
			t.Fatal("a second expiry wrote again")
		}
	})
	t.Run("a closed turn clears the claim", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(claim("a"))
		sc.ok(say("a", parley.FinalityTurn))
		if sc.s.Claim != nil {
			t.Fatalf("claim after the turn closed: %+v", sc.s.Claim)
		}
		sc.ok(claim("b"))
	})
	t.Run("claims need no open turn and the right number", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityNone))
		sc.fail(claim("b"), parley.ETURNCONFLICT)
		sc.ok(say("a", parley.FinalityTurn))
		sc.fail(conv.ClaimTurn{Actor: conv.Actor{AgentID: "b"}, ExpectTurn: 7}, parley.EPRECONDITION)
		sc.fail(conv.ClaimTurn{Actor: conv.Actor{AgentID: "b"}, TTL: time.Hour}, parley.EINVALIDVALUE)
		sc.ok(conv.ClaimTurn{Actor: conv.Actor{AgentID: "b"}, ExpectTurn: 2})
	})
}

func TestResetAndAbort(t *testing.T) {
	t.Parallel()
	reset := func(agent string, claim bool) conv.ResetTurn {
		return conv.ResetTurn{Actor: conv.Actor{AgentID: agent}, Claim: claim}
	}
	t.Run("reset by the owner keeps the turn and writes one marker", func(t *testing.T) {
		sc := newScript(t, parley.PolicyRoundRobin, "a", "b")
		sc.ok(starting(say("a", parley.FinalityNone), 1))
		d := sc.ok(reset("a", false))
		if types(d.Events) != "turn.reset" || !d.Result.WasReset || d.Result.Turn != 1 || d.Events[0].Turn != 1 {
			t.Fatalf("reset: %s %+v", types(d.Events), d.Result)
		}
		if d := sc.ok(reset("a", false)); len(d.Events) != 0 || d.Result.Turn != 1 || !d.Result.WasReset {
			t.Fatalf("second reset wrote %s", types(d.Events))
		}
		wantGuidance(t, sc, "a", parley.GuidanceContinueTurn, 1) // no guidance to others
		if d := sc.ok(starting(say("a", parley.FinalityNone), 1)); d.Result.Turn != 1 {
			t.Fatalf("restart after reset in turn %d, want 1", d.Result.Turn)
		}
		// After writing again, another reset writes another marker.
		if d := sc.ok(reset("a", false)); types(d.Events) != "turn.reset" {
			t.Fatalf("reset after new writes: %s", types(d.Events))
		}
	})
	t.Run("reset by a non-owner writes nothing and answers lastTurn+1", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityNone))
		d := sc.ok(reset("b", false))
		if len(d.Events) != 0 || d.Result.WasReset || d.Result.Turn != 2 {
			t.Fatalf("non-owner reset: %s %+v", types(d.Events), d.Result)
		}
	})
	t.Run("resetAndClaim", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityNone))
		if d := sc.ok(reset("a", true)); !d.Result.WasReset || d.Result.Turn != 1 {
			t.Fatalf("owner resetAndClaim: %+v", d.Result)
		}
		sc.fail(reset("b", true), parley.ETURNCONFLICT) // a's turn is open: nothing to claim
		sc.ok(say("a", parley.FinalityTurn))
		d := sc.ok(reset("b", true))
		if d.Result.WasReset || !d.Result.Claimed || d.Result.Turn != 2 || types(d.Events) != "turn.claimed" {
			t.Fatalf("non-owner resetAndClaim: %s %+v", types(d.Events), d.Result)
		}
		sc.fail(reset("c", true), parley.ECLAIMCONFLICT)
	})
	t.Run("abort closes the turn and guidance moves on", func(t *testing.T) {
		sc := newScript(t, parley.PolicyRoundRobin, "a", "b", "c")
		sc.ok(say("a", parley.FinalityTurn))
		sc.ok(say("b", parley.FinalityNone))
		sc.fail(conv.AbortTurn{Actor: conv.Actor{AgentID: "c"}}, parley.ETURNCONFLICT)
		d := sc.ok(conv.AbortTurn{Actor: conv.Actor{AgentID: "b"}, Reason: "stuck"})
		if types(d.Events) != "turn.aborted" || d.Events[0].Finality != parley.FinalityTurn || sc.s.Open != nil {
			t.Fatalf("abort: %s, open %+v", types(d.Events), sc.s.Open)
		}
		wantGuidance(t, sc, "c", parley.GuidanceStartTurn, 3)
		again := sc.ok(conv.AbortTurn{Actor: conv.Actor{AgentID: "b"}})
		if len(again.Events) != 0 || again.Result.Seq != d.Result.Seq {
			t.Fatalf("repeated abort: %s seq %d", types(again.Events), again.Result.Seq)
		}
		sc.fail(conv.AbortTurn{Actor: conv.Actor{AgentID: "c"}}, parley.ETURNCONFLICT)
	})
	t.Run("an admin may abort another agent's turn", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(say("a", parley.FinalityNone))
		sc.ok(conv.AbortTurn{Actor: conv.Actor{AgentID: "ops", Admin: true}})
		if sc.s.Open != nil || sc.s.LastOwner != "a" {
			t.Fatalf("after admin abort: open %+v lastOwner %q", sc.s.Open, sc.s.LastOwner)
		}
	})
}

func TestGuidance(t *testing.T) {
	t.Parallel()
	t.Run("round-robin", func(t *testing.T) {
		sc := newScript(t, parley.PolicyRoundRobin, "a", "b")
		wantGuidance(t, sc, "a", parley.GuidanceStartTurn, 1)
		sc.ok(say("a", parley.FinalityNone))
		wantGuidance(t, sc, "a", parley.GuidanceContinueTurn, 1)
		sc.ok(say("a", parley.FinalityTurn))
		wantGuidance(t, sc, "b", parley.GuidanceStartTurn, 2)
		sc.ok(say("b", parley.FinalityTurn))
		wantGuidance(t, sc, "a", parley.GuidanceStartTurn, 3)
		sc.ok(say("human", parley.FinalityTurn)) // not a participant: the first goes next
		wantGuidance(t, sc, "a", parley.GuidanceStartTurn, 4)
	})
	t.Run("free names nobody", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree, "a", "b")
		sc.ok(say("a", parley.FinalityTurn))
		wantGuidance(t, sc, "", parley.GuidanceStartTurn, 2)
	})
	t.Run("next is named by the closing message", func(t *testing.T) {
		sc := newScript(t, parley.PolicyNext, "a", "b", "c")
		m := say("a", parley.FinalityTurn)
		m.Next = "c"
		sc.ok(m)
		wantGuidance(t, sc, "c", parley.GuidanceStartTurn, 2)
		sc.ok(say("c", parley.FinalityTurn))
		wantGuidance(t, sc, "", parley.GuidanceStartTurn, 3)
		bad := say("a", parley.FinalityNone)
		bad.Next = "b"
		sc.fail(bad, parley.EINVALIDVALUE) // next needs a closing message
	})
	t.Run("next overrides round-robin", func(t *testing.T) {
		sc := newScript(t, parley.PolicyRoundRobin, "a", "b", "c")
		m := say("a", parley.FinalityTurn)
		m.Next = "c"
		sc.ok(m)
		wantGuidance(t, sc, "c", parley.GuidanceStartTurn, 2)
	})
}
