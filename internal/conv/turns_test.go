package conv_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// The turn rules of seeds 002 and 003: preconditions, ownership, finality.

func wantTurn(turn int) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if o.d.Result.Turn != turn || len(o.d.Events) == 0 || o.d.Events[len(o.d.Events)-1].Turn != turn {
			t.Fatalf("wrote %s to turn %d, want turn %d", types(o.d.Events), o.d.Result.Turn, turn)
		}
	}
}

// wantNaming checks a refusal's message names every string in names and
// that it carries the stored head.
func wantNaming(names ...string) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		for _, n := range names {
			if !strings.Contains(o.err.Message, n) {
				t.Fatalf("message %q does not name %q", o.err.Message, n)
			}
		}
		if o.err.Head == nil || o.err.Head.LastSeq != o.before.LastSeq {
			t.Fatalf("head %+v, want the head at seq %d", o.err.Head, o.before.LastSeq)
		}
	}
}

func TestPreconditionRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "explicit turn T+1 while T is open is precondition_failed naming T, with head",
			steps: []any{starting(say("a", parley.FinalityNone), 1)},
			cmd:   starting(say("b", parley.FinalityNone), 2), code: parley.EPRECONDITION,
			check: func(t *testing.T, o outcome) {
				wantNaming("turn 1 is open", "owned by a")(t, o)
				if h := o.err.Head; h.OpenTurn == nil || h.OpenTurn.Turn != 1 || h.OpenTurn.Owner != "a" || h.LastTurn != 1 {
					t.Fatalf("head %+v", h)
				}
			}},
		{name: "the owner starting T+1 while its T is open is precondition_failed too",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   starting(say("a", parley.FinalityNone), 2), code: parley.EPRECONDITION, check: wantNaming("turn 1")},
		{name: "starting a turn ahead of lastTurn+1 is precondition_failed",
			steps: []any{say("a", parley.FinalityTurn)},
			cmd:   starting(say("b", parley.FinalityNone), 5), code: parley.EPRECONDITION, check: wantNaming("turn 5", "next turn is 2")},
		{name: "starting a turn behind lastTurn+1 is precondition_failed",
			steps: []any{say("a", parley.FinalityTurn), say("b", parley.FinalityTurn)},
			cmd:   starting(say("c", parley.FinalityNone), 2), code: parley.EPRECONDITION, check: wantNaming("next turn is 3")},
		{name: "starting lastTurn+1 with no open turn opens it",
			steps: []any{say("a", parley.FinalityTurn)},
			cmd:   starting(say("b", parley.FinalityNone), 2), check: wantTurn(2)},
		{name: "starting turn 1 of a new conversation",
			cmd: starting(say("a", parley.FinalityTurn), 1), check: wantTurn(1)},
		{name: "starting the owner's open turn again without a reset is precondition_failed",
			steps: []any{starting(say("a", parley.FinalityNone), 1)},
			cmd:   starting(say("a", parley.FinalityNone), 1), code: parley.EPRECONDITION},
		{name: "append to a closed turn is precondition_failed",
			steps: []any{say("a", parley.FinalityNone), say("a", parley.FinalityTurn)},
			cmd:   continuing(say("a", parley.FinalityNone), 1), code: parley.EPRECONDITION, check: wantNaming("turn 1", "not open")},
		{name: "append to a closed turn while a later one is open is precondition_failed",
			steps: []any{say("a", parley.FinalityTurn), say("b", parley.FinalityNone)},
			cmd:   continuing(say("a", parley.FinalityNone), 1), code: parley.EPRECONDITION},
		{name: "continuing a turn that never opened is precondition_failed",
			cmd: continuing(say("a", parley.FinalityNone), 1), code: parley.EPRECONDITION},
		{name: "continuing the own open turn",
			steps: []any{starting(say("a", parley.FinalityNone), 1)},
			cmd:   continuing(say("a", parley.FinalityTurn), 1), check: wantTurn(1)},
		{name: "continuing another agent's open turn is turn_conflict naming the owner",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   continuing(say("b", parley.FinalityNone), 1), code: parley.ETURNCONFLICT, check: wantNaming("owned by a")},
		{name: "expectTurn 0 is invalid_value",
			cmd: starting(say("a", parley.FinalityNone), 0), code: parley.EINVALIDVALUE},
		{name: "expectTurn below 0 is invalid_value",
			cmd: continuing(say("a", parley.FinalityNone), -1), code: parley.EINVALIDVALUE},
		{name: "starting a turn another agent claimed is claim_conflict",
			steps: []any{claim("b", 10*time.Second)},
			cmd:   starting(say("a", parley.FinalityNone), 1), code: parley.ECLAIMCONFLICT, check: wantNaming("claimed by b")},
		{name: "starting the turn the writer claimed opens it and clears the claim",
			steps: []any{claim("b", 10*time.Second)},
			cmd:   starting(say("b", parley.FinalityNone), 1),
			check: func(t *testing.T, o outcome) {
				wantTurn(1)(t, o)
				if o.sc.s.Claim != nil {
					t.Fatalf("claim %+v stays after its turn opened", o.sc.s.Claim)
				}
			}},
		{name: "a trace with a precondition follows the same rules",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   conv.PostTrace{Actor: actor("b"), Precondition: &parley.Precondition{ExpectTurn: 2, StartingTurn: true}}, code: parley.EPRECONDITION},
	})
}

func TestTurnOwnershipRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "another agent writing into an open turn is turn_conflict naming the owner",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   say("b", parley.FinalityNone), code: parley.ETURNCONFLICT,
			check: func(t *testing.T, o outcome) {
				wantNaming("turn 1", "owned by a")(t, o)
				if o.err.Head.OpenTurn == nil || o.err.Head.OpenTurn.Owner != "a" {
					t.Fatalf("head %+v", o.err.Head)
				}
			}},
		{name: "another agent's trace into an open turn is turn_conflict",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   trace("b"), code: parley.ETURNCONFLICT, check: wantNaming("owned by a")},
		{name: "another agent closing an open turn is turn_conflict",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   say("b", parley.FinalityTurn), code: parley.ETURNCONFLICT},
		{name: "the owner continues its open turn without a precondition",
			steps: []any{say("a", parley.FinalityNone), trace("a")},
			cmd:   say("a", parley.FinalityNone), check: wantTurn(1)},
		{name: "once the turn closes another agent opens the next",
			steps: []any{say("a", parley.FinalityNone), say("a", parley.FinalityTurn)},
			cmd:   say("b", parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				wantTurn(2)(t, o)
				if o.sc.s.Open.Owner != "b" || o.sc.s.LastTurn != 2 {
					t.Fatalf("open %+v", o.sc.s.Open)
				}
			}},
		{name: "a trace opens a turn",
			cmd: trace("a"),
			check: func(t *testing.T, o outcome) {
				wantTurn(1)(t, o)
				if o.sc.s.Open == nil || o.sc.s.Open.Owner != "a" {
					t.Fatalf("open %+v", o.sc.s.Open)
				}
			}},
		{name: "a user message takes a turn like any other",
			steps: []any{say("a", parley.FinalityTurn)},
			cmd:   userSays("u1"), check: wantTurn(2)},
	})
}

func TestFinalityRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "finality turn closes the turn",
			steps: []any{say("a", parley.FinalityNone)},
			cmd:   say("a", parley.FinalityTurn),
			check: func(t *testing.T, o outcome) {
				if s := o.sc.s; s.Open != nil || s.LastTurn != 1 || s.LastClosedSeq != o.d.Result.Seq || s.Closed {
					t.Fatalf("after close: %s", mustJSON(s))
				}
			}},
		{name: "finality none keeps the turn open",
			cmd: say("a", parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				if o.sc.s.Open == nil || o.sc.s.LastClosedSeq != 0 {
					t.Fatalf("open %+v", o.sc.s.Open)
				}
			}},
		{name: "empty finality is none",
			cmd: conv.PostMessage{Actor: actor("a"), Role: parley.RoleAssistant},
			check: func(t *testing.T, o outcome) {
				if e := o.d.Events[0]; e.Finality != parley.FinalityNone || o.sc.s.Open == nil {
					t.Fatalf("event finality %q", e.Finality)
				}
			}},
		{name: "finality conversation closes the open turn and the conversation",
			steps: []any{say("a", parley.FinalityNone), conv.Delegate{Actor: actor("a"), To: "worker"}},
			cmd:   say("a", parley.FinalityConversation),
			check: func(t *testing.T, o outcome) {
				if s := o.sc.s; !s.Closed || s.Open != nil || s.Claim != nil || s.LastClosedSeq != o.d.Result.Seq {
					t.Fatalf("after close: %s", mustJSON(s))
				}
			}},
		{name: "finality conversation from a fresh turn clears the claim",
			steps: []any{say("a", parley.FinalityTurn), claim("b", time.Minute)},
			cmd:   say("b", parley.FinalityConversation),
			check: func(t *testing.T, o outcome) {
				wantTurn(2)(t, o)
				if !o.sc.s.Closed || o.sc.s.Claim != nil {
					t.Fatal("not closed")
				}
			}},
		{name: "a trace with finality turn is invalid_request (400)",
			steps: []any{trace("a")},
			cmd:   conv.PostTrace{Actor: actor("a"), Finality: parley.FinalityTurn}, code: parley.EINVALID, check: wantMentions("only messages")},
		{name: "a trace with finality conversation is invalid_request",
			cmd: conv.PostTrace{Actor: actor("a"), Finality: parley.FinalityConversation}, code: parley.EINVALID},
		{name: "a trace with finality none is fine",
			cmd: conv.PostTrace{Actor: actor("a"), Finality: parley.FinalityNone}, check: wantTurn(1)},
		{name: "a trace with an unknown finality is invalid_value",
			cmd: conv.PostTrace{Actor: actor("a"), Finality: "forever"}, code: parley.EINVALIDVALUE},
	})
}

func wantMentions(s string) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if !strings.Contains(o.err.Message, s) {
			t.Fatalf("message %q does not say %q", o.err.Message, s)
		}
	}
}

// closedConversation is a conversation that turn 3 closed, with a prompt
// dispatched to runner bot and another one waiting.
var closedConversation = []any{
	say("a", parley.FinalityTurn),
	conv.EnqueuePrompt{Actor: actor("human"), ID: "p1", Content: "now"},
	conv.EnqueuePrompt{Actor: actor("human"), ID: "p2", Content: "later"},
	conv.DispatchPrompt{Runner: "bot", Content: "now"}, // user message p1: turn 2
	say("b", parley.FinalityNone),
	conv.Delegate{Actor: actor("b"), To: "worker"},
	say("b", parley.FinalityConversation),
}

func TestWriteAfterConversationFinalityIsConversationClosed(t *testing.T) {
	t.Parallel()
	var rules []rule
	for name, cmd := range map[string]conv.Command{
		"message":                     say("c", parley.FinalityNone),
		"message by the closer":       say("b", parley.FinalityNone),
		"message by its delegate":     say("worker", parley.FinalityNone),
		"message starting turn 4":     starting(say("c", parley.FinalityNone), 4),
		"user message":                userSays("u9"),
		"system message":              system(parley.FinalityNone),
		"streaming message":           conv.PostMessage{Actor: actor("c"), Role: parley.RoleAssistant, Streaming: true},
		"message closing it again":    say("c", parley.FinalityConversation),
		"message with a bad shape":    conv.PostMessage{Actor: actor("c"), Role: "oracle"},
		"trace":                       trace("c"),
		"claim":                       claim("c", time.Second),
		"reset by the closer":         reset("b"),
		"reset by another":            reset("c"),
		"resetAndClaim":               resetAndClaim("c"),
		"abort by the closer":         abort("b"),
		"abort by an admin":           conv.AbortTurn{Actor: admin},
		"delegate":                    delegate("b", "w2"),
		"revert":                      conv.Revert{Actor: actor("c"), MessageID: "m1"},
		"enqueue a prompt":            conv.EnqueuePrompt{Actor: actor("human"), ID: "p2", Content: "x"},
		"withdraw a waiting prompt":   conv.WithdrawPrompt{Actor: actor("human"), ID: "p2"},
		"promote a waiting prompt":    conv.PromotePrompt{Actor: actor("human"), ID: "p2"},
		"stream to a message unknown": conv.StreamText{Actor: actor("c"), MessageID: "r1", Delta: "x"},
	} {
		rules = append(rules, rule{name: name, steps: closedConversation, cmd: cmd, code: parley.ECLOSED, check: wantNaming("closed")})
	}
	for name, cmd := range map[string]conv.Command{
		"expire claims":                  conv.ExpireClaim{},
		"dispatch a prompt":              conv.DispatchPrompt{Runner: "bot", Content: "later"},
		"complete the dispatched prompt": conv.CompletePrompt{Actor: actor("bot")},
		"requeue the dispatched prompt":  conv.RequeuePrompt{Runner: "bot"},
	} {
		rules = append(rules, rule{name: name + " writes nothing", steps: closedConversation, cmd: cmd, check: func(t *testing.T, o outcome) {
			if len(o.d.Events) != 0 {
				t.Fatalf("wrote %s after close", types(o.d.Events))
			}
		}})
	}
	runRules(t, rules)
	t.Run("guidance is nil after close", func(t *testing.T) {
		t.Parallel()
		sc := build(t, parley.PolicyRoundRobin, []string{"a", "b"}, closedConversation...)
		if g := sc.s.Guidance(sc.now); g != nil {
			t.Fatalf("guidance %+v", g)
		}
		if h := sc.s.Head(sc.now); !h.Closed || h.OpenTurn != nil || h.LastTurn != 3 {
			t.Fatalf("head %+v", h)
		}
	})
}

func TestSystemMessageRules(t *testing.T) {
	t.Parallel()
	inTurn0 := func(t *testing.T, o outcome) {
		t.Helper()
		if o.d.Result.Turn != 0 || o.d.Events[0].Turn != 0 || o.sc.s.LastTurn != o.before.LastTurn {
			t.Fatalf("system message in turn %d; lastTurn %d -> %d", o.d.Result.Turn, o.before.LastTurn, o.sc.s.LastTurn)
		}
		if mustJSON(o.sc.s.Open) != mustJSON(o.before.Open) {
			t.Fatalf("open turn %+v -> %+v", o.before.Open, o.sc.s.Open)
		}
	}
	runRules(t, []rule{
		{name: "an admin system message stays in turn 0 and does not move lastTurn",
			steps: []any{say("a", parley.FinalityTurn)}, cmd: system(parley.FinalityNone), check: inTurn0},
		{name: "a system message in a new conversation is in turn 0",
			cmd: system(parley.FinalityNone), check: inTurn0},
		{name: "a system message during an open turn leaves it open to its owner",
			steps: []any{say("a", parley.FinalityTurn), say("b", parley.FinalityNone)}, cmd: system(parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				inTurn0(t, o)
				if d := o.sc.ok(say("b", parley.FinalityTurn)); d.Result.Turn != 2 {
					t.Fatalf("owner continued in turn %d", d.Result.Turn)
				}
			}},
		{name: "a system message does not count as another agent taking over",
			steps: []any{say("a", parley.FinalityTurn), system(parley.FinalityNone)}, cmd: say("b", parley.FinalityNone), check: wantTurn(2)},
		{name: "a non-admin system message is forbidden",
			cmd: conv.PostMessage{Actor: actor("a"), Role: parley.RoleSystem}, code: parley.EFORBIDDEN},
		{name: "a system message with finality turn is invalid_value",
			steps: []any{say("a", parley.FinalityNone)}, cmd: system(parley.FinalityTurn), code: parley.EINVALIDVALUE},
		{name: "a system message with a precondition is invalid_value",
			cmd: func() conv.Command { m := system(parley.FinalityNone); return starting(m, 1) }(), code: parley.EINVALIDVALUE},
		{name: "a system message with an unknown turnId is invalid_value",
			cmd: func() conv.Command { m := system(parley.FinalityNone); m.TurnID = "ghost"; return m }(), code: parley.EINVALIDVALUE},
		{name: "a system message with a known turnId keeps it",
			steps: []any{userSays("u1")},
			cmd:   func() conv.Command { m := system(parley.FinalityNone); m.TurnID = "u1"; return m }(),
			check: func(t *testing.T, o outcome) {
				if m := lastMessage(t, o.d); m.TurnID != "u1" || m.Turn != 0 {
					t.Fatalf("turnId %q turn %d", m.TurnID, m.Turn)
				}
			}},
		{name: "a system message with finality conversation closes the conversation and the open turn",
			steps: []any{say("a", parley.FinalityNone)}, cmd: system(parley.FinalityConversation),
			check: func(t *testing.T, o outcome) {
				if s := o.sc.s; !s.Closed || s.Open != nil || s.LastTurn != 1 || s.LastOwner != "a" {
					t.Fatalf("after close: %s", mustJSON(s))
				}
			}},
	})
}

// TestSeed003Examples replays the three examples of seed 003 event by event:
// the server, not the agent, numbers the turns, and every guidance says
// which turn it is.
func TestSeed003Examples(t *testing.T) {
	t.Parallel()
	type ev struct {
		cmd  conv.Command
		turn int
		wait time.Duration // the agent is called again later
	}
	thought := func(a string) conv.Command { return trace(a) }
	examples := []struct {
		name   string
		events []ev
	}{
		{"simple back-and-forth gives turns 1, 2, 3", []ev{
			{cmd: say("agent-a", parley.FinalityTurn), turn: 1},
			{cmd: say("agent-b", parley.FinalityTurn), turn: 2},
			{cmd: say("agent-a", parley.FinalityTurn), turn: 3},
		}},
		{"multi-step processing by one agent stays in one turn", []ev{
			{cmd: thought("agent-a"), turn: 1},
			{cmd: thought("agent-a"), turn: 1}, // tool_call
			{cmd: thought("agent-a"), turn: 1}, // tool_result
			{cmd: say("agent-a", parley.FinalityTurn), turn: 1},
			{cmd: thought("agent-b"), turn: 2},
			{cmd: say("agent-b", parley.FinalityTurn), turn: 2},
		}},
		{"interrupted and resumed stays in the same turn", []ev{
			{cmd: thought("agent-a"), turn: 1},
			{cmd: thought("agent-a"), turn: 1},
			{cmd: thought("agent-a"), turn: 1, wait: time.Hour}, // takeTurn is called again
			{cmd: say("agent-a", parley.FinalityTurn), turn: 1},
			{cmd: say("agent-b", parley.FinalityTurn), turn: 2},
		}},
	}
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			sc := newScript(t, parley.PolicyRoundRobin, "agent-a", "agent-b")
			wantGuidance(t, sc, "agent-a", parley.GuidanceStartTurn, 1)
			for i, e := range ex.events {
				sc.advance(e.wait)
				d := sc.ok(e.cmd)
				if d.Result.Turn != e.turn || d.Events[0].Turn != e.turn {
					t.Fatalf("event %d in turn %d, want %d", i+1, d.Result.Turn, e.turn)
				}
				if g := sc.s.Guidance(sc.now); g == nil || g.Turn < 1 {
					t.Fatalf("guidance %+v carries no turn", g)
				}
				if sc.s.Open != nil {
					wantGuidance(t, sc, sc.s.Open.Owner, parley.GuidanceContinueTurn, e.turn)
				} else {
					wantGuidance(t, sc, map[bool]string{true: "agent-b", false: "agent-a"}[sc.s.LastOwner == "agent-a"], parley.GuidanceStartTurn, e.turn+1)
				}
			}
			checkInvariants(sc)
		})
	}
}
