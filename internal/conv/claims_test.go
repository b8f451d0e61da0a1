package conv_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Claims (seed 002): an agent claims turn lastTurn+1; the first claim wins,
// the same agent may claim again, claims expire after their TTL, and a
// closed turn clears them.

func wantEvents(want string) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if got := types(o.d.Events); got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}

func TestClaimRules(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	runRules(t, []rule{
		{name: "a claim on the next turn",
			steps: []any{say("a", parley.FinalityTurn)},
			cmd:   claim("b", ttl),
			check: func(t *testing.T, o outcome) {
				wantEvents("turn.claimed")(t, o)
				r := o.d.Result
				if r.Turn != 2 || !r.Claimed || r.Claim == nil || r.Claim.AgentID != "b" || r.Claim.Turn != 2 || !r.Claim.ExpiresAt.Equal(o.sc.now.Add(ttl)) || r.Seq != o.d.Events[0].Seq {
					t.Fatalf("result %+v claim %+v", r, r.Claim)
				}
				if h := o.sc.s.Head(o.sc.now); h.Claim == nil || h.Claim.AgentID != "b" || h.LastTurn != 1 || h.OpenTurn != nil {
					t.Fatalf("head %+v: a claim does not open the turn", h)
				}
			}},
		{name: "first of two concurrent claims wins, the loser gets claim_conflict (409)",
			agents: []string{"a", "b"}, policy: parley.PolicyRoundRobin,
			steps: []any{claim("b", ttl)},
			cmd:   claim("a", ttl), code: parley.ECLAIMCONFLICT,
			check: func(t *testing.T, o outcome) {
				wantNaming("claimed by b")(t, o)
				if c := o.err.Head.Claim; c == nil || c.AgentID != "b" || c.Turn != 1 {
					t.Fatalf("head claim %+v", c)
				}
			}},
		{name: "the loser of a claim cannot open the claimed turn by writing",
			steps: []any{claim("b", ttl)},
			cmd:   say("a", parley.FinalityNone), code: parley.ECLAIMCONFLICT, check: wantNaming("claimed by b")},
		{name: "the loser of a claim cannot trace into the claimed turn",
			steps: []any{claim("b", ttl)},
			cmd:   trace("a"), code: parley.ECLAIMCONFLICT},
		{name: "the same agent re-claiming succeeds and extends expiresAt",
			steps: []any{claim("a", ttl), 5 * time.Second},
			cmd:   claim("a", ttl),
			check: func(t *testing.T, o outcome) {
				wantEvents("turn.claimed")(t, o)
				if !o.before.Claim.ExpiresAt.Equal(epoch0.Add(ttl)) || !o.sc.s.Claim.ExpiresAt.Equal(epoch0.Add(5*time.Second+ttl)) || o.d.Result.Turn != 1 {
					t.Fatalf("expiresAt %v -> %v", o.before.Claim.ExpiresAt, o.sc.s.Claim.ExpiresAt)
				}
			}},
		{name: "the claim holder opens the claimed turn by writing",
			steps: []any{claim("b", ttl)},
			cmd:   say("b", parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				wantEvents("message")(t, o)
				if o.sc.s.Claim != nil || o.sc.s.Open.Owner != "b" || o.d.Result.Turn != 1 {
					t.Fatalf("claim %+v open %+v", o.sc.s.Claim, o.sc.s.Open)
				}
			}},
		{name: "an expired claim lets another agent in, claim.expired first in the same decision",
			steps: []any{claim("a", ttl), ttl + time.Second},
			cmd:   say("b", parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				wantEvents("claim.expired message")(t, o)
				e := o.d.Events[0]
				if e.AgentID != "a" || e.Turn != 1 || e.Seq != o.before.LastSeq+1 || o.d.Result.Turn != 1 || o.sc.s.Open.Owner != "b" || o.sc.s.Claim != nil {
					t.Fatalf("expired %+v, result %+v", e, o.d.Result)
				}
			}},
		{name: "an expired claim lets another agent claim, claim.expired first",
			steps: []any{claim("a", ttl), ttl},
			cmd:   claim("b", ttl),
			check: func(t *testing.T, o outcome) {
				wantEvents("claim.expired turn.claimed")(t, o)
				if o.sc.s.Claim.AgentID != "b" {
					t.Fatalf("claim %+v", o.sc.s.Claim)
				}
			}},
		{name: "a claim still holds one millisecond before its TTL",
			steps: []any{claim("a", ttl), ttl - time.Millisecond},
			cmd:   claim("b", ttl), code: parley.ECLAIMCONFLICT},
		{name: "the holder of an expired claim claims again after claim.expired",
			steps: []any{claim("a", ttl), 2 * ttl},
			cmd:   claim("a", ttl), check: wantEvents("claim.expired turn.claimed")},
		{name: "a refused command after a claim lapsed carries the stored head and writes nothing",
			steps: []any{claim("a", ttl), 2 * ttl, say("b", parley.FinalityTurn), claim("a", ttl), 2 * ttl},
			cmd:   starting(say("c", parley.FinalityNone), 7), code: parley.EPRECONDITION,
			check: func(t *testing.T, o outcome) {
				if h := o.err.Head; h.LastSeq != o.before.LastSeq || h.Claim != nil {
					t.Fatalf("head %+v; the log ends at seq %d with a lapsed claim", h, o.before.LastSeq)
				}
				if o.sc.s.Claim == nil {
					t.Fatal("the lapsed claim is gone though nothing was written")
				}
			}},
		{name: "ExpireClaim writes nothing before the TTL",
			steps: []any{claim("a", ttl), ttl - time.Millisecond},
			cmd:   conv.ExpireClaim{},
			check: func(t *testing.T, o outcome) {
				wantEvents("")(t, o)
				if o.sc.s.Claim == nil {
					t.Fatal("claim gone")
				}
			}},
		{name: "ExpireClaim writes claim.expired once the TTL passed",
			steps: []any{claim("a", ttl), ttl},
			cmd:   conv.ExpireClaim{},
			check: func(t *testing.T, o outcome) {
				wantEvents("claim.expired")(t, o)
				if o.sc.s.Claim != nil {
					t.Fatalf("claim %+v", o.sc.s.Claim)
				}
			}},
		{name: "ExpireClaim writes claim.expired only once",
			steps: []any{claim("a", ttl), ttl, conv.ExpireClaim{}},
			cmd:   conv.ExpireClaim{}, check: wantEvents("")},
		{name: "ExpireClaim with no claim writes nothing",
			cmd: conv.ExpireClaim{}, check: wantEvents("")},
		{name: "a claim needs no open turn: turn_conflict",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   claim("b", ttl), code: parley.ETURNCONFLICT, check: wantNaming("turn 1", "owned by a")},
		{name: "the owner of the open turn cannot claim the next either",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   claim("a", ttl), code: parley.ETURNCONFLICT},
		{name: "a claim with expectTurn lastTurn+1",
			steps: []any{say("a", parley.FinalityTurn)},
			cmd:   conv.ClaimTurn{Actor: actor("b"), ExpectTurn: 2}, check: wantEvents("turn.claimed")},
		{name: "a claim with another expectTurn is precondition_failed",
			steps: []any{say("a", parley.FinalityTurn)},
			cmd:   conv.ClaimTurn{Actor: actor("b"), ExpectTurn: 3}, code: parley.EPRECONDITION, check: wantNaming("turn 3", "next turn is 2")},
		{name: "a claim without TTL gets the default TTL",
			cmd: conv.ClaimTurn{Actor: actor("b")},
			check: func(t *testing.T, o outcome) {
				if !o.sc.s.Claim.ExpiresAt.Equal(epoch0.Add(conv.DefaultLimits.ClaimTTL)) {
					t.Fatalf("expiresAt %v", o.sc.s.Claim.ExpiresAt)
				}
			}},
		{name: "a claim TTL at the limit",
			cmd: claim("b", conv.DefaultLimits.MaxClaimTTL), check: wantEvents("turn.claimed")},
		{name: "a claim TTL over the limit is invalid_value",
			cmd: claim("b", conv.DefaultLimits.MaxClaimTTL+time.Millisecond), code: parley.EINVALIDVALUE},
		{name: "a closed turn clears the claim",
			steps: []any{claim("a", ttl), say("a", parley.FinalityNone)},
			cmd:   say("a", parley.FinalityTurn),
			check: func(t *testing.T, o outcome) {
				if o.sc.s.Claim != nil {
					t.Fatalf("claim %+v", o.sc.s.Claim)
				}
				o.sc.ok(claim("b", ttl))
			}},
		{name: "an aborted turn clears the claim",
			steps: []any{claim("a", ttl), say("a", parley.FinalityNone)},
			cmd:   abort("a"),
			check: func(t *testing.T, o outcome) {
				if o.sc.s.Claim != nil {
					t.Fatalf("claim %+v", o.sc.s.Claim)
				}
			}},
		{name: "a system message leaves the claim alone",
			steps: []any{claim("a", ttl)},
			cmd:   system(parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				if o.sc.s.Claim == nil || o.sc.s.Claim.AgentID != "a" {
					t.Fatalf("claim %+v", o.sc.s.Claim)
				}
			}},
	})
}

// TestConcurrentClaimsAgainstOneState decides two claims against the same
// state, as two writers racing do: both would be accepted, the engine's
// optimistic concurrency appends the first, and the second, decided again on
// the new state, loses.
func TestConcurrentClaimsAgainstOneState(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	env := conv.Env{Now: sc.now}
	first, err1 := conv.Decide(sc.s, claim("a", time.Minute), env)
	second, err2 := conv.Decide(sc.s, claim("b", time.Minute), env)
	if err1 != nil || err2 != nil || first.Events[0].Seq != second.Events[0].Seq {
		t.Fatalf("both decided on one state: %v %v", err1, err2)
	}
	sc.ok(claim("a", time.Minute))
	e := sc.fail(claim("b", time.Minute), parley.ECLAIMCONFLICT)
	if e.Head.Claim == nil || e.Head.Claim.AgentID != "a" {
		t.Fatalf("head %+v", e.Head)
	}
	wantGuidance(t, sc, "a", parley.GuidanceStartTurn, 1)
	checkInvariants(sc)
}
