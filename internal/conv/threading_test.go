package conv_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Threading (seed 004) and idempotency (DESIGN "Behaviour").

func withParent(m conv.PostMessage, parent string, depth int) conv.PostMessage {
	m.ReplyTo = parent
	m.Known.Parent = &conv.ParentRef{ID: parent, TurnID: "u1", Depth: depth}
	return m
}

func wantDepth(depth int) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if m := lastMessage(t, o.d); m.Depth != depth {
			t.Fatalf("depth %d, want %d", m.Depth, depth)
		}
	}
}

func TestThreadingRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "replyTo to itself is invalid_thread",
			cmd: replyTo(withID(say("a", parley.FinalityNone), "x1"), "x1"), code: parley.EINVALIDTHREAD, check: wantMentions("itself")},
		{name: "replyTo to itself is invalid_thread even when the engine found a parent",
			cmd: withParent(withID(say("a", parley.FinalityNone), "x1"), "x1", 0), code: parley.EINVALIDTHREAD},
		{name: "replyTo unknown (Known.Parent nil) is invalid_thread",
			steps: []any{userSays("u1")},
			cmd:   replyTo(say("a", parley.FinalityNone), "ghost"), code: parley.EINVALIDTHREAD, check: wantMentions("ghost")},
		{name: "replyTo a message of another conversation, resolved as nil, is invalid_thread",
			cmd: replyTo(say("a", parley.FinalityNone), "in-another-conversation"), code: parley.EINVALIDTHREAD},
		{name: "replyTo that is not an id is invalid_thread",
			cmd: replyTo(say("a", parley.FinalityNone), "not an id"), code: parley.EINVALIDTHREAD},
		{name: "a reply to a top-level message has depth 1",
			steps: []any{userSays("u1")}, cmd: replyTo(say("a", parley.FinalityNone), "u1"), check: wantDepth(1)},
		{name: "a message without replyTo has depth 0",
			steps: []any{userSays("u1")}, cmd: say("a", parley.FinalityNone), check: wantDepth(0)},
		{name: "a new message with 100 ancestors (Parent.Depth 99) is invalid_thread",
			cmd: withParent(say("a", parley.FinalityNone), "p", 99), code: parley.EINVALIDTHREAD,
			check: func(t *testing.T, o outcome) {
				wantMentions("100 ancestors")(t, o)
				if o.err.Details["maxDepth"] != 100 {
					t.Fatalf("details %v", o.err.Details)
				}
			}},
		{name: "a new message with 99 ancestors (Parent.Depth 98) is fine and gets depth 99",
			cmd: withParent(say("a", parley.FinalityNone), "p", 98), check: wantDepth(99)},
		{name: "a parent far past the limit is invalid_thread",
			cmd: withParent(say("a", parley.FinalityNone), "p", 5000), code: parley.EINVALIDTHREAD},
		{name: "the parent's turnId does not matter to a continued turn",
			steps: []any{say("a", parley.FinalityNone)}, cmd: withParent(say("a", parley.FinalityNone), "p", 3),
			check: both(wantDepth(4), wantTurnID("m1"))},
		{name: "fan-out: many replies to one parent",
			steps: []any{userSays("q"), replyTo(say("a", parley.FinalityTurn), "q"), replyTo(say("b", parley.FinalityTurn), "q")},
			cmd:   replyTo(say("c", parley.FinalityTurn), "q"), check: both(wantDepth(1), wantTurnID("q"))},
		{name: "a duplicate message id (Known.IDTaken) is busy",
			steps: []any{userSays("q")}, cmd: withID(say("a", parley.FinalityNone), "q"), code: parley.EBUSY, check: wantNaming(`"q"`)},
		{name: "a duplicate id the engine found is busy even in a fresh conversation",
			cmd: func() conv.Command { m := say("a", parley.FinalityNone); m.Known.IDTaken = true; return m }(), code: parley.EBUSY},
	})
}

func TestThreadDepthLimitIsConfigurable(t *testing.T) {
	t.Parallel()
	for _, max := range []int{1, 2, 5, 100, 250} {
		sc := newScript(t, parley.PolicyFree)
		sc.env.Limits.MaxThreadDepth = max
		// A real chain: each message replies to the one before.
		prev := ""
		for i := range max {
			m := say("a", parley.FinalityNone)
			m.ReplyTo = prev
			got := lastMessage(t, sc.ok(m))
			if got.Depth != i {
				t.Fatalf("max %d: message %d has depth %d", max, i, got.Depth)
			}
			prev = got.ID
		}
		// The next one would have max ancestors.
		e := sc.fail(replyTo(say("a", parley.FinalityNone), prev), parley.EINVALIDTHREAD)
		if e.Details["maxDepth"] != max {
			t.Fatalf("max %d: details %v", max, e.Details)
		}
		// Fan-out below the limit is still fine.
		if max > 1 {
			sc.ok(replyTo(say("a", parley.FinalityNone), sc.order[max-2]))
		}
		checkInvariants(sc)
	}
}

// retry is a write with a clientRequestId whose earlier result the engine
// found (Known.Prior).
func retry(m conv.PostMessage, key, hash string, response string) conv.PostMessage {
	m.ClientRequestID, m.RequestHash = key, hash
	m.Known.Prior = &conv.Prior{RequestHash: "h1", Response: []byte(response)}
	return m
}

func wantReplay(response string) func(t *testing.T, o outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if string(o.d.Replay) != response || len(o.d.Events) != 0 || len(o.d.Messages) != 0 || o.d.Result.Message != nil {
			t.Fatalf("decision %+v, want a replay of %s", o.d, response)
		}
	}
}

func TestIdempotencyRules(t *testing.T) {
	t.Parallel()
	closer := func() conv.PostMessage {
		m := say("a", parley.FinalityTurn)
		m.ClientRequestID, m.RequestHash = "req-1", "h1"
		return m
	}
	runRules(t, []rule{
		{name: "a retried write that closed its turn returns its original result though the turn is now closed",
			steps: []any{closer()}, cmd: retry(say("a", parley.FinalityTurn), "req-1", "h1", `{"turn":1}`), check: wantReplay(`{"turn":1}`)},
		{name: "a retried turn closer returns its result while another agent owns the next turn",
			steps: []any{closer(), say("b", parley.FinalityNone)},
			cmd:   retry(say("a", parley.FinalityTurn), "req-1", "h1", `{"turn":1}`), check: wantReplay(`{"turn":1}`)},
		{name: "a retried write with a precondition that no longer holds returns its original result",
			steps: []any{say("x", parley.FinalityTurn), closer()},
			cmd:   retry(starting(say("a", parley.FinalityTurn), 2), "req-1", "h1", `{"turn":2}`), check: wantReplay(`{"turn":2}`)},
		{name: "a retried write returns its original result even if the conversation is closed",
			steps: []any{func() conv.Command { m := closer(); m.Finality = parley.FinalityConversation; return m }()},
			cmd:   retry(say("a", parley.FinalityConversation), "req-1", "h1", `{"seq":2}`), check: wantReplay(`{"seq":2}`)},
		{name: "a retry with a different hash is idempotency_mismatch",
			steps: []any{closer()}, cmd: retry(say("a", parley.FinalityTurn), "req-1", "h2", `{}`), code: parley.EIDEMPOTENCY, check: wantMentions("req-1")},
		{name: "a retry with a different hash is idempotency_mismatch even if the conversation is closed",
			steps: []any{say("a", parley.FinalityConversation)}, cmd: retry(say("a", parley.FinalityTurn), "req-1", "h2", `{}`), code: parley.EIDEMPOTENCY},
		{name: "a retry replays before any shape check",
			cmd: func() conv.Command {
				m := retry(say("a", parley.FinalityTurn), "req-1", "h1", `{"turn":1}`)
				m.Role = "oracle"
				return m
			}(), check: wantReplay(`{"turn":1}`)},
		{name: "a retry replays even when a claim lapsed, writing nothing",
			steps: []any{closer(), claim("b", time.Second), 2 * time.Second},
			cmd:   retry(say("a", parley.FinalityTurn), "req-1", "h1", `{"turn":1}`),
			check: both(wantReplay(`{"turn":1}`), func(t *testing.T, o outcome) {
				if o.sc.s.Claim == nil {
					t.Fatal("the replay wrote claim.expired")
				}
			})},
		{name: "a retried trace returns its original result",
			steps: []any{closer()},
			cmd: conv.PostTrace{Actor: actor("a"), ClientRequestID: "req-t", RequestHash: "h1",
				Known: conv.Lookups{Prior: &conv.Prior{RequestHash: "h1", Response: []byte(`{"seq":3}`)}}},
			check: wantReplay(`{"seq":3}`)},
		{name: "a retried trace with another body is idempotency_mismatch",
			cmd: conv.PostTrace{Actor: actor("a"), ClientRequestID: "req-t", RequestHash: "h2",
				Known: conv.Lookups{Prior: &conv.Prior{RequestHash: "h1", Response: []byte(`{}`)}}},
			code: parley.EIDEMPOTENCY},
		{name: "a first write with a clientRequestId is decided normally",
			cmd: closer(), check: wantTurn(1)},
		{name: "a prior without a clientRequestId is ignored",
			steps: []any{say("b", parley.FinalityNone)},
			cmd: func() conv.Command {
				m := say("a", parley.FinalityNone)
				m.Known.Prior = &conv.Prior{RequestHash: "", Response: []byte(`{}`)}
				return m
			}(), code: parley.ETURNCONFLICT},
	})
	t.Run("the script's own retry of a write replays what it first answered", func(t *testing.T) {
		t.Parallel()
		sc := newScript(t, parley.PolicyFree)
		first := sc.ok(closer())
		sc.ok(say("b", parley.FinalityConversation))
		again := sc.ok(closer())
		if string(again.Replay) != mustJSON(first.Result) {
			t.Fatalf("replay %s, want %s", again.Replay, mustJSON(first.Result))
		}
		checkInvariants(sc)
	})
}
