package conv_test

import (
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// turnId (seed 000): the id of the user message (or task run) that started
// the work, shared by every response, tool call and delegated worker that
// stems from it. Delegation lets workers write into the owner's turn.

func wantTurnID(id string) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		m := lastMessage(t, o.d)
		if m.TurnID != id || o.d.Events[len(o.d.Events)-1].TurnID != id {
			t.Fatalf("turnId %q, want %q", m.TurnID, id)
		}
	}
}

func withTurnID(m conv.PostMessage, id string) conv.PostMessage { m.TurnID = id; return m }

func TestTurnIDRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "a user message's turnId is its own id",
			cmd: userSays("abc123"), check: wantTurnID("abc123")},
		{name: "a user message replying to an earlier message still starts its own exchange",
			steps: []any{userSays("q1"), replyTo(say("bot", parley.FinalityTurn), "q1")},
			cmd:   replyTo(userSays("q2"), "m1"), check: both(wantTurnID("q2"), wantDepth(2))},
		{name: "a later user message starts a new exchange",
			steps: []any{userSays("q1"), replyTo(say("bot", parley.FinalityTurn), "q1")},
			cmd:   userSays("q2"), check: wantTurnID("q2")},
		{name: "turnId of an assistant reply (replyTo the user message) is the id of the user message",
			steps: []any{userSays("abc123")},
			cmd:   replyTo(say("bot", parley.FinalityNone), "abc123"),
			check: both(wantTurnID("abc123"), func(t *testing.T, o outcome) {
				if m := lastMessage(t, o.d); m.Turn != 2 || m.Depth != 1 {
					t.Fatalf("reply in turn %d depth %d", m.Turn, m.Depth)
				}
			})},
		{name: "a reply to an older exchange takes that exchange's turnId",
			steps: []any{userSays("q1"), replyTo(say("bot", parley.FinalityTurn), "q1"), userSays("q2")},
			cmd:   replyTo(say("bot", parley.FinalityNone), "q1"), check: wantTurnID("q1")},
		{name: "continuing a turn keeps its turnId",
			steps: []any{userSays("abc123"), replyTo(say("bot", parley.FinalityNone), "abc123"), trace("bot")},
			cmd:   say("bot", parley.FinalityTurn), check: wantTurnID("abc123")},
		{name: "continuing a turn keeps its turnId even when replying elsewhere",
			steps: []any{userSays("q1"), replyTo(say("bot", parley.FinalityTurn), "q1"), userSays("q2"), replyTo(say("bot", parley.FinalityNone), "q2")},
			cmd:   replyTo(say("bot", parley.FinalityNone), "q1"), check: wantTurnID("q2")},
		{name: "a new turn without replyTo continues the last exchange's turnId",
			steps: []any{userSays("u1")},
			cmd:   say("a", parley.FinalityTurn), check: wantTurnID("u1")},
		{name: "the first turn with no user message takes the message's own id",
			cmd: withID(say("a", parley.FinalityNone), "first"), check: wantTurnID("first")},
		{name: "explicit unknown turnId is invalid_value",
			steps: []any{userSays("u1")},
			cmd:   withTurnID(say("b", parley.FinalityNone), "nope"), code: parley.EINVALIDVALUE, check: wantMentions("nope")},
		{name: "explicit unknown turnId on a trace is invalid_value",
			cmd: conv.PostTrace{Actor: actor("a"), TurnID: "nope"}, code: parley.EINVALIDVALUE},
		{name: "explicit known turnId of an earlier exchange opens a turn with it",
			steps: []any{userSays("u1"), say("a", parley.FinalityTurn), userSays("u2")},
			cmd:   withTurnID(say("b", parley.FinalityNone), "u1"), check: wantTurnID("u1")},
		{name: "explicit turnId the engine resolved (a task run) is accepted",
			cmd: func() conv.Command {
				m := withTurnID(say("a", parley.FinalityNone), "task-run-xyz")
				m.Known.TurnIDKnown = true
				return m
			}(), check: wantTurnID("task-run-xyz")},
		{name: "explicit turnId equal to the message's own id",
			cmd: withTurnID(withID(say("a", parley.FinalityNone), "own"), "own"), check: wantTurnID("own")},
		{name: "explicit turnId other than the open turn's is invalid_value",
			steps: []any{userSays("u1"), say("a", parley.FinalityNone)},
			cmd:   withTurnID(say("a", parley.FinalityNone), "m2"), code: parley.EINVALIDVALUE},
		{name: "explicit turnId equal to the open turn's is fine",
			steps: []any{userSays("u1"), say("a", parley.FinalityNone)},
			cmd:   withTurnID(say("a", parley.FinalityNone), "u1"), check: wantTurnID("u1")},
		{name: "explicit turnId that is not an id is invalid_value",
			cmd: withTurnID(say("a", parley.FinalityNone), "no spaces"), code: parley.EINVALIDVALUE},
		{name: "turn.reset and turn.aborted carry the turn's turnId",
			steps: []any{userSays("u1"), say("a", parley.FinalityNone), reset("a")},
			cmd:   abort("a"),
			check: func(t *testing.T, o outcome) {
				for _, e := range o.sc.log[len(o.sc.log)-2:] {
					if e.TurnID != "u1" {
						t.Fatalf("%s has turnId %q", e.Type, e.TurnID)
					}
				}
			}},
	})
}

func TestDelegationRules(t *testing.T) {
	t.Parallel()
	// The exchange of seed 000: a user question, the assistant's turn, a
	// worker and its sub-worker.
	exchange := []any{
		userSays("abc123"),
		replyTo(say("assistant", parley.FinalityNone), "abc123"),
		delegate("assistant", "worker"),
		delegate("worker", "sub-worker"),
	}
	ex := func(more ...any) []any { return append(append([]any{}, exchange...), more...) }
	inOwnersTurn := both(wantTurnID("abc123"), func(t *testing.T, o outcome) {
		if m := lastMessage(t, o.d); m.Turn != 2 || o.sc.s.Open.Owner != "assistant" {
			t.Fatalf("turn %d, open %+v", m.Turn, o.sc.s.Open)
		}
	})
	runRules(t, []rule{
		{name: "delegation writes a delegation event in the owner's turn",
			steps: ex()[:2], cmd: delegate("assistant", "worker"),
			check: both(wantEvents("delegation"), func(t *testing.T, o outcome) {
				e := o.d.Events[0]
				if e.Turn != 2 || e.TurnID != "abc123" || e.AgentID != "assistant" || o.d.Result.Seq != e.Seq {
					t.Fatalf("delegation %+v", e)
				}
				if ds := o.sc.s.Open.Delegates; len(ds) != 1 || ds[0] != "worker" {
					t.Fatalf("delegates %v", ds)
				}
			})},
		{name: "a delegated worker writes with the owner's turnId in the owner's turn",
			steps: ex(), cmd: say("worker", parley.FinalityNone), check: inOwnersTurn},
		{name: "a sub-worker (delegate of the delegate) writes with the owner's turnId in the owner's turn",
			steps: ex(), cmd: say("sub-worker", parley.FinalityNone), check: inOwnersTurn},
		{name: "a sub-worker's trace carries the owner's turnId",
			steps: ex(), cmd: trace("sub-worker"),
			check: func(t *testing.T, o outcome) {
				if e := o.d.Events[0]; e.TurnID != "abc123" || e.Turn != 2 {
					t.Fatalf("trace %+v", e)
				}
			}},
		{name: "a delegate continues with a precondition on the owner's turn",
			steps: ex(), cmd: continuing(say("worker", parley.FinalityNone), 2), check: inOwnersTurn},
		{name: "a delegate may not start the owner's turn",
			steps: ex(), cmd: starting(say("worker", parley.FinalityNone), 2), code: parley.EPRECONDITION},
		{name: "a delegate writing does not take the turn from its owner",
			steps: ex(say("worker", parley.FinalityNone)), cmd: say("assistant", parley.FinalityNone), check: inOwnersTurn},
		{name: "a delegate may not close the turn",
			steps: ex(), cmd: say("worker", parley.FinalityTurn), code: parley.ETURNCONFLICT, check: wantNaming("only assistant")},
		{name: "a sub-worker may not close the turn",
			steps: ex(), cmd: say("sub-worker", parley.FinalityTurn), code: parley.ETURNCONFLICT},
		{name: "a delegate may not close the conversation",
			steps: ex(), cmd: say("worker", parley.FinalityConversation), code: parley.ETURNCONFLICT},
		{name: "the owner closes the turn its delegates wrote to",
			steps: ex(say("worker", parley.FinalityNone), say("sub-worker", parley.FinalityNone)), cmd: say("assistant", parley.FinalityTurn),
			check: func(t *testing.T, o outcome) {
				if o.sc.s.Open != nil {
					t.Fatalf("open %+v", o.sc.s.Open)
				}
			}},
		{name: "a worker loses the right to write into the turn once it closes",
			steps: ex(say("assistant", parley.FinalityTurn)), cmd: continuing(say("worker", parley.FinalityNone), 2), code: parley.EPRECONDITION},
		{name: "a sub-worker loses the right to trace into the turn once it closes",
			steps: ex(say("assistant", parley.FinalityTurn)),
			cmd:   conv.PostTrace{Actor: actor("sub-worker"), Precondition: &parley.Precondition{ExpectTurn: 2}}, code: parley.EPRECONDITION},
		{name: "after the turn closes a former worker's write opens a turn of its own",
			steps: ex(say("assistant", parley.FinalityTurn)), cmd: say("worker", parley.FinalityNone),
			check: func(t *testing.T, o outcome) {
				if m := lastMessage(t, o.d); m.Turn != 3 || o.sc.s.Open.Owner != "worker" || len(o.sc.s.Open.Delegates) != 0 {
					t.Fatalf("turn %d open %+v", m.Turn, o.sc.s.Open)
				}
			}},
		{name: "delegates of a turn do not carry into the next turn of the same owner",
			steps: ex(say("assistant", parley.FinalityTurn), say("assistant", parley.FinalityNone)), cmd: say("worker", parley.FinalityNone),
			code: parley.ETURNCONFLICT},
		{name: "a worker loses the right to write once the turn is aborted",
			steps: ex(abort("assistant")), cmd: continuing(say("sub-worker", parley.FinalityNone), 2), code: parley.EPRECONDITION},
		{name: "only the owner or a delegate may delegate",
			steps: ex(), cmd: delegate("stranger", "friend"), code: parley.ETURNCONFLICT, check: wantNaming("owned by assistant")},
		{name: "delegating with no open turn is turn_conflict",
			steps: []any{say("a", parley.FinalityTurn)}, cmd: delegate("a", "worker"), code: parley.ETURNCONFLICT},
		{name: "delegating to an existing delegate writes nothing",
			steps: ex(), cmd: delegate("assistant", "sub-worker"), check: both(wantEvents(""), wantResult(2, false, true))},
		{name: "delegating to the owner writes nothing",
			steps: ex(), cmd: delegate("worker", "assistant"), check: wantEvents("")},
		{name: "delegating to an invalid agent id is invalid_value",
			steps: ex(), cmd: delegate("assistant", "not an id"), code: parley.EINVALIDVALUE},
		{name: "a delegate's reset writes nothing and leaves the owner's turn alone",
			steps: ex(), cmd: reset("worker"),
			check: both(wantEvents(""), func(t *testing.T, o outcome) {
				if o.sc.s.Open.Reset {
					t.Fatal("reset by a delegate")
				}
			})},
	})
}
