package conv_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Guidance (seed 003, DESIGN "derived, not stored"): it always carries an
// explicit turn; continue_turn with the open turn's number for its owner,
// otherwise start_turn lastTurn+1 for the claim holder, the agent the
// closing message named, the next participant round-robin, or anyone.

func closeNaming(agent, next string) conv.PostMessage {
	m := say(agent, parley.FinalityTurn)
	m.Next = next
	return m
}

func TestGuidanceRules(t *testing.T) {
	t.Parallel()
	rr, free, next := parley.PolicyRoundRobin, parley.PolicyFree, parley.PolicyNext
	abc := []string{"a", "b", "c"}
	cases := []struct {
		name   string
		policy parley.TurnPolicy
		agents []string
		steps  []any
		at     time.Duration // guidance asked for this long after the last step
		agent  string
		kind   parley.GuidanceKind
		turn   int
	}{
		{name: "a new round-robin conversation starts with the first participant", policy: rr, agents: abc,
			agent: "a", kind: parley.GuidanceStartTurn, turn: 1},
		{name: "a new free conversation names nobody", policy: free, agents: abc,
			kind: parley.GuidanceStartTurn, turn: 1},
		{name: "a round-robin conversation without participants names nobody", policy: rr,
			kind: parley.GuidanceStartTurn, turn: 1},
		{name: "an open turn is continue_turn with the same number for its owner", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityTurn), say("c", parley.FinalityNone)},
			agent: "c", kind: parley.GuidanceContinueTurn, turn: 2},
		{name: "an open turn stays continue_turn for its owner when a delegate writes", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityNone), delegate("a", "worker"), say("worker", parley.FinalityNone)},
			agent: "a", kind: parley.GuidanceContinueTurn, turn: 1},
		{name: "an open turn opened by a trace", policy: free,
			steps: []any{trace("b")}, agent: "b", kind: parley.GuidanceContinueTurn, turn: 1},
		{name: "a reset turn is continue_turn for its owner", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityNone), reset("a")},
			agent: "a", kind: parley.GuidanceContinueTurn, turn: 1},
		{name: "round-robin names the participant after the last owner", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityTurn)}, agent: "b", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "round-robin wraps around", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityTurn), say("b", parley.FinalityTurn), say("c", parley.FinalityTurn)},
			agent: "a", kind: parley.GuidanceStartTurn, turn: 4},
		{name: "round-robin follows whoever owned the last turn", policy: rr, agents: abc,
			steps: []any{say("b", parley.FinalityTurn)}, agent: "c", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "round-robin after a non-participant names the first participant", policy: rr, agents: abc,
			steps: []any{say("b", parley.FinalityTurn), userSays("u1")}, agent: "a", kind: parley.GuidanceStartTurn, turn: 3},
		{name: "round-robin is not moved by a system message", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityTurn), system(parley.FinalityNone)}, agent: "b", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "free names nobody after a turn", policy: free, agents: abc,
			steps: []any{say("a", parley.FinalityTurn)}, kind: parley.GuidanceStartTurn, turn: 2},
		{name: "next names the agent of the closing message's next", policy: next, agents: abc,
			steps: []any{closeNaming("a", "c")}, agent: "c", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "next names a non-participant too", policy: next, agents: abc,
			steps: []any{closeNaming("a", "human")}, agent: "human", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "next without a named agent names nobody", policy: next, agents: abc,
			steps: []any{closeNaming("a", "c"), say("c", parley.FinalityTurn)}, kind: parley.GuidanceStartTurn, turn: 3},
		{name: "a closing message's next overrides round-robin", policy: rr, agents: abc,
			steps: []any{closeNaming("a", "c")}, agent: "c", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "a closing message's next counts under free too", policy: free, agents: abc,
			steps: []any{closeNaming("a", "b")}, agent: "b", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "an active claim holder is named", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityTurn), claim("c", time.Minute)}, agent: "c", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "an active claim wins over next", policy: next, agents: abc,
			steps: []any{closeNaming("a", "b"), claim("c", time.Minute)}, agent: "c", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "an expired claim is not named, even before claim.expired is written", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityTurn), claim("c", time.Minute)}, at: time.Minute,
			agent: "b", kind: parley.GuidanceStartTurn, turn: 2},
		{name: "after an abort, the next participant", policy: rr, agents: abc,
			steps: []any{say("a", parley.FinalityNone), abort("a")}, agent: "b", kind: parley.GuidanceStartTurn, turn: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sc := build(t, c.policy, c.agents, c.steps...)
			sc.advance(c.at)
			g := sc.s.Guidance(sc.now)
			if g == nil || g.NextAgentID != c.agent || g.Kind != c.kind || g.Turn != c.turn || g.AfterSeq != sc.s.LastSeq {
				t.Fatalf("guidance %+v, want %q %s turn %d after seq %d", g, c.agent, c.kind, c.turn, sc.s.LastSeq)
			}
			checkInvariants(sc)
		})
	}
}

func TestGuidanceAfterCloseIsNil(t *testing.T) {
	t.Parallel()
	for name, last := range map[string]conv.Command{
		"closed by the owner of an open turn": say("a", parley.FinalityConversation),
		"closed by a system message":          system(parley.FinalityConversation),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := build(t, parley.PolicyRoundRobin, []string{"a", "b"}, say("a", parley.FinalityNone), last)
			for _, at := range []time.Time{sc.now, sc.now.Add(time.Hour)} {
				if g := sc.s.Guidance(at); g != nil {
					t.Fatalf("guidance %+v after close", g)
				}
			}
		})
	}
}

// TestGuidanceAlwaysCarriesItsTurn walks a conversation through every kind
// of change and checks after each that the guidance names a turn, the one
// an agent must use: the open turn, or lastTurn+1.
func TestGuidanceAlwaysCarriesItsTurn(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyRoundRobin, "a", "b")
	for i, st := range []any{
		trace("a"), say("a", parley.FinalityNone), reset("a"), starting(say("a", parley.FinalityNone), 1),
		delegate("a", "worker"), say("worker", parley.FinalityNone), say("a", parley.FinalityTurn),
		claim("b", time.Second), 2 * time.Second, conv.ExpireClaim{}, system(parley.FinalityNone),
		say("b", parley.FinalityNone), abort("b"), closeNaming("a", "b"), resetAndClaim("b"),
	} {
		sc.run(st)
		g := sc.s.Guidance(sc.now)
		want := sc.s.LastTurn + 1
		if sc.s.Open != nil {
			want = sc.s.Open.Turn
		}
		if g == nil || g.Turn != want || g.Turn < 1 {
			t.Fatalf("step %d: guidance %+v, want turn %d", i, g, want)
		}
	}
	checkInvariants(sc)
}

// TestGuidanceFollowsThePromptQueue: with a prompt waiting, guidance names
// the agent the dispatcher will hand it to, not whom the turn policy would
// name; once it is dispatched, the runner answering it.
func TestGuidanceFollowsThePromptQueue(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyRoundRobin, "alice", "bob")
	sc.ok(say("alice", parley.FinalityTurn))
	wantGuidance(t, sc, "bob", parley.GuidanceStartTurn, 2)
	sc.ok(enqueue("p1", ""))
	wantGuidance(t, sc, "bob", parley.GuidanceStartTurn, 2) // no runner known: the policy's choice
	if g := sc.s.GuidanceFor(sc.now, []string{"alice"}); g.NextAgentID != "alice" || g.Kind != parley.GuidanceStartTurn || g.Turn != 2 {
		t.Fatalf("with alice's runner attached, guidance = %+v", g)
	}
	p := enqueue("p2", "")
	p.To = "carol"
	sc.ok(p)
	if g := sc.s.GuidanceFor(sc.now, nil); g.NextAgentID != "carol" {
		t.Fatalf("a prompt addressed to carol waits; guidance = %+v", g)
	}
	if g := sc.s.GuidanceFor(sc.now, []string{"alice", "carol"}); g.NextAgentID != "alice" {
		t.Fatalf("p1 goes to the first runner; guidance = %+v", g)
	}
	sc.ok(conv.DispatchPrompt{Runner: "alice", Content: "do p1"}) // the asker's message takes turn 2
	wantGuidance(t, sc, "alice", parley.GuidanceStartTurn, 3)
	sc.ok(conv.ClaimTurn{Actor: actor("bob")})
	wantGuidance(t, sc, "bob", parley.GuidanceStartTurn, 3) // a claim holds the floor over the queue
}
