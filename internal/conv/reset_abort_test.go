package conv_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Reset and abort (seed 002): reset is "let me try again" (same agent, same
// turn, no guidance to others); abort is "I give up" (a tombstone that closes
// the turn, guidance to the next agent).

func wantResult(turn int, wasReset, claimed bool) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if r := o.d.Result; r.Turn != turn || r.WasReset != wasReset || r.Claimed != claimed {
			t.Fatalf("result %+v, want turn %d wasReset %v claimed %v", r, turn, wasReset, claimed)
		}
	}
}

func both(checks ...func(t *testing.T, o outcome)) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		for _, c := range checks {
			c(t, o)
		}
	}
}

// turnTwoOpen is a conversation where a closed turn 1 and b owns turn 2.
var turnTwoOpen = []any{say("a", parley.FinalityTurn), starting(say("b", parley.FinalityNone), 2), trace("b")}

func TestResetRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "reset by the owner keeps the turn number and writes exactly one turn.reset",
			steps: turnTwoOpen, cmd: reset("b"),
			check: both(wantEvents("turn.reset"), wantResult(2, true, true), func(t *testing.T, o outcome) {
				e := o.d.Events[0]
				if e.Turn != 2 || e.AgentID != "b" || e.Finality != parley.FinalityNone || o.d.Result.Seq != e.Seq {
					t.Fatalf("marker %+v", e)
				}
				if s := o.sc.s; s.LastTurn != 2 || s.Open == nil || s.Open.Turn != 2 || !s.Open.Reset || s.Open.Owner != "b" {
					t.Fatalf("after reset: open %+v", s.Open)
				}
			})},
		{name: "reset sends no guidance to others: the owner continues",
			agents: []string{"a", "b", "c"}, policy: parley.PolicyRoundRobin,
			steps: turnTwoOpen, cmd: reset("b"),
			check: func(t *testing.T, o outcome) { wantGuidance(t, o.sc, "b", parley.GuidanceContinueTurn, 2) }},
		{name: "a second reset writes nothing",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")), cmd: reset("b"),
			check: both(wantEvents(""), wantResult(2, true, true))},
		{name: "a reset after writing again writes a new marker",
			steps: append(append([]any{}, turnTwoOpen...), reset("b"), trace("b")), cmd: reset("b"),
			check: wantEvents("turn.reset")},
		{name: "reset by a non-owner writes nothing and answers lastTurn+1",
			steps: turnTwoOpen, cmd: reset("c"),
			check: both(wantEvents(""), wantResult(3, false, false), func(t *testing.T, o outcome) {
				if o.sc.s.Open.Reset {
					t.Fatal("another agent reset the owner's turn")
				}
			})},
		{name: "reset by a delegate writes nothing and answers lastTurn+1",
			steps: append(append([]any{}, turnTwoOpen...), delegate("b", "worker")), cmd: reset("worker"),
			check: both(wantEvents(""), wantResult(3, false, false))},
		{name: "reset with no open turn writes nothing and answers lastTurn+1",
			steps: []any{say("a", parley.FinalityTurn)}, cmd: reset("a"),
			check: both(wantEvents(""), wantResult(2, false, false))},
		{name: "after reset the owner writes {expectTurn: T, startingTurn: true} and continues turn T",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")),
			cmd:   starting(say("b", parley.FinalityNone), 2),
			check: both(wantTurn(2), func(t *testing.T, o outcome) {
				s := o.sc.s
				if s.LastTurn != 2 || s.Open.Reset || s.Open.OpenedSeq != o.before.Open.OpenedSeq || s.Open.TurnID != o.before.Open.TurnID {
					t.Fatalf("open %+v, before %+v", s.Open, o.before.Open)
				}
				if m := lastMessage(t, o.d); m.TurnID != o.before.Open.TurnID {
					t.Fatalf("turnId %q", m.TurnID)
				}
				o.sc.ok(continuing(say("b", parley.FinalityTurn), 2))
			})},
		{name: "after reset the owner may also just continue",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")),
			cmd:   continuing(say("b", parley.FinalityNone), 2), check: wantTurn(2)},
		{name: "after reset and a restart, starting T again is precondition_failed",
			steps: append(append([]any{}, turnTwoOpen...), reset("b"), starting(say("b", parley.FinalityNone), 2)),
			cmd:   starting(say("b", parley.FinalityNone), 2), code: parley.EPRECONDITION},
		{name: "after reset another agent still cannot start T+1",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")),
			cmd:   starting(say("c", parley.FinalityNone), 3), code: parley.EPRECONDITION, check: wantNaming("turn 2 is open")},
		{name: "after reset another agent cannot start T either",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")),
			cmd:   starting(say("c", parley.FinalityNone), 2), code: parley.EPRECONDITION},
		{name: "after reset the owner cannot start T+1",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")),
			cmd:   starting(say("b", parley.FinalityNone), 3), code: parley.EPRECONDITION},
	})
}

func TestResetAndClaimRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "resetAndClaim by the owner resets",
			steps: turnTwoOpen, cmd: resetAndClaim("b"),
			check: both(wantEvents("turn.reset"), wantResult(2, true, true), func(t *testing.T, o outcome) {
				if o.sc.s.Claim != nil || !o.sc.s.Open.Reset {
					t.Fatalf("claim %+v open %+v", o.sc.s.Claim, o.sc.s.Open)
				}
			})},
		{name: "resetAndClaim by the owner again writes nothing",
			steps: append(append([]any{}, turnTwoOpen...), resetAndClaim("b")), cmd: resetAndClaim("b"),
			check: both(wantEvents(""), wantResult(2, true, true))},
		{name: "resetAndClaim by a non-owner with no open turn claims lastTurn+1",
			steps: []any{say("a", parley.FinalityTurn)}, cmd: conv.ResetTurn{Actor: actor("b"), Claim: true, TTL: 5 * time.Second},
			check: both(wantEvents("turn.claimed"), wantResult(2, false, true), func(t *testing.T, o outcome) {
				if c := o.d.Result.Claim; c == nil || c.AgentID != "b" || c.Turn != 2 || !c.ExpiresAt.Equal(o.sc.now.Add(5*time.Second)) {
					t.Fatalf("claim %+v", c)
				}
			})},
		{name: "resetAndClaim by a non-owner while another holds the claim is claim_conflict",
			steps: []any{say("a", parley.FinalityTurn), claim("c", time.Minute)}, cmd: resetAndClaim("b"),
			code: parley.ECLAIMCONFLICT, check: wantNaming("claimed by c")},
		{name: "resetAndClaim by the claim holder claims again",
			steps: []any{say("a", parley.FinalityTurn), claim("b", time.Minute)}, cmd: resetAndClaim("b"),
			check: both(wantEvents("turn.claimed"), wantResult(2, false, true))},
		{name: "resetAndClaim by a non-owner while another's turn is open is turn_conflict",
			steps: turnTwoOpen, cmd: resetAndClaim("c"), code: parley.ETURNCONFLICT, check: wantNaming("owned by b")},
		{name: "resetAndClaim then starting the claimed turn",
			steps: []any{say("a", parley.FinalityTurn), resetAndClaim("b")},
			cmd:   starting(say("b", parley.FinalityNone), 2), check: wantTurn(2)},
	})
}

func TestAbortRules(t *testing.T) {
	t.Parallel()
	three := []string{"a", "b", "c"}
	runRules(t, []rule{
		{name: "abort closes the turn with turn.aborted and finality turn",
			steps: turnTwoOpen, cmd: conv.AbortTurn{Actor: actor("b"), Reason: "stuck"},
			check: both(wantEvents("turn.aborted"), func(t *testing.T, o outcome) {
				e := o.d.Events[0]
				if e.Finality != parley.FinalityTurn || e.Turn != 2 || e.AgentID != "b" || e.TurnID != o.before.Open.TurnID || o.d.Result.Seq != e.Seq || o.d.Result.Turn != 2 {
					t.Fatalf("tombstone %+v result %+v", e, o.d.Result)
				}
				if s := o.sc.s; s.Open != nil || s.LastTurn != 2 || s.LastClosedSeq != e.Seq {
					t.Fatalf("after abort: %s", mustJSON(s))
				}
				o.sc.ok(starting(say("c", parley.FinalityNone), 3))
			})},
		{name: "after abort guidance goes to the next agent round-robin, not the aborter",
			agents: three, policy: parley.PolicyRoundRobin, steps: turnTwoOpen, cmd: abort("b"),
			check: func(t *testing.T, o outcome) { wantGuidance(t, o.sc, "c", parley.GuidanceStartTurn, 3) }},
		{name: "after abort under policy free guidance names nobody",
			agents: three, steps: turnTwoOpen, cmd: abort("b"),
			check: func(t *testing.T, o outcome) { wantGuidance(t, o.sc, "", parley.GuidanceStartTurn, 3) }},
		{name: "repeating the abort writes nothing and returns the same seq",
			steps: append(append([]any{}, turnTwoOpen...), abort("b")), cmd: abort("b"),
			check: both(wantEvents(""), func(t *testing.T, o outcome) {
				if o.d.Result.Seq != o.before.LastSeq || o.d.Result.Turn != 2 {
					t.Fatalf("result %+v, want the tombstone's seq %d", o.d.Result, o.before.LastSeq)
				}
			})},
		{name: "repeating the abort after a system message still returns the same seq",
			steps: append(append([]any{}, turnTwoOpen...), abort("b"), system(parley.FinalityNone)), cmd: abort("b"),
			check: both(wantEvents(""), func(t *testing.T, o outcome) {
				if o.d.Result.Seq != o.before.LastSeq-1 {
					t.Fatalf("result seq %d", o.d.Result.Seq)
				}
			})},
		{name: "an abort by another agent after an abort is turn_conflict",
			steps: append(append([]any{}, turnTwoOpen...), abort("b")), cmd: abort("c"), code: parley.ETURNCONFLICT},
		{name: "an abort of an old turn once a new one opened is not a repeat",
			steps: append(append([]any{}, turnTwoOpen...), abort("b"), say("c", parley.FinalityTurn)), cmd: abort("b"), code: parley.ETURNCONFLICT},
		{name: "a non-owner abort is turn_conflict",
			steps: turnTwoOpen, cmd: abort("c"), code: parley.ETURNCONFLICT, check: wantNaming("owned by b")},
		{name: "a delegate abort is turn_conflict",
			steps: append(append([]any{}, turnTwoOpen...), delegate("b", "worker")), cmd: abort("worker"), code: parley.ETURNCONFLICT},
		{name: "abort with no open turn is turn_conflict",
			steps: []any{say("a", parley.FinalityTurn)}, cmd: abort("a"), code: parley.ETURNCONFLICT, check: wantNaming("no open turn")},
		{name: "an admin abort is allowed, and round-robin goes on after the owner",
			agents: three, policy: parley.PolicyRoundRobin, steps: turnTwoOpen, cmd: conv.AbortTurn{Actor: admin},
			check: both(wantEvents("turn.aborted"), func(t *testing.T, o outcome) {
				if o.sc.s.Open != nil || o.sc.s.LastOwner != "b" {
					t.Fatalf("open %+v lastOwner %q", o.sc.s.Open, o.sc.s.LastOwner)
				}
				wantGuidance(t, o.sc, "c", parley.GuidanceStartTurn, 3)
			})},
		{name: "an admin repeating its abort writes nothing",
			steps: append(append([]any{}, turnTwoOpen...), conv.AbortTurn{Actor: admin}), cmd: conv.AbortTurn{Actor: admin}, check: wantEvents("")},
		{name: "abort of a reset turn",
			steps: append(append([]any{}, turnTwoOpen...), reset("b")), cmd: abort("b"),
			check: func(t *testing.T, o outcome) {
				if o.sc.s.Open != nil {
					t.Fatalf("open %+v", o.sc.s.Open)
				}
			}},
		{name: "after abort the closing message's next is forgotten",
			agents: three, policy: parley.PolicyNext,
			steps: []any{func() conv.Command { m := say("a", parley.FinalityTurn); m.Next = "c"; return m }(), say("c", parley.FinalityNone)},
			cmd:   abort("c"),
			check: func(t *testing.T, o outcome) { wantGuidance(t, o.sc, "", parley.GuidanceStartTurn, 3) }},
	})
}
