package conv_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
)

func userSays(id string) conv.PostMessage {
	return conv.PostMessage{Actor: conv.Actor{AgentID: "human"}, ID: id, Role: parley.RoleUser, Parts: []parley.Part{{Type: parley.PartText, Text: "question"}}, Finality: parley.FinalityTurn}
}

func TestTurnID(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	u := lastMessage(t, sc.ok(userSays("abc123")))
	if u.TurnID != "abc123" {
		t.Fatalf("user message turnId %q, want its own id", u.TurnID)
	}
	reply := say("assistant", parley.FinalityNone)
	reply.ReplyTo = "abc123"
	a := lastMessage(t, sc.ok(reply))
	if a.TurnID != "abc123" || a.Depth != 1 {
		t.Fatalf("reply turnId %q depth %d, want abc123 and 1", a.TurnID, a.Depth)
	}
	if m := lastMessage(t, sc.ok(say("assistant", parley.FinalityNone))); m.TurnID != "abc123" {
		t.Fatalf("continuing keeps the turnId: got %q", m.TurnID)
	}
	// The owner delegates to a worker, which delegates to a sub-worker.
	sc.ok(conv.Delegate{Actor: conv.Actor{AgentID: "assistant"}, To: "worker"})
	sc.ok(conv.Delegate{Actor: conv.Actor{AgentID: "worker"}, To: "sub-worker"})
	for _, agent := range []string{"worker", "sub-worker"} {
		m := lastMessage(t, sc.ok(say(agent, parley.FinalityNone)))
		if m.TurnID != "abc123" || m.Turn != 2 {
			t.Fatalf("%s wrote turnId %q turn %d, want abc123 in turn 2", agent, m.TurnID, m.Turn)
		}
	}
	if d := sc.ok(conv.PostTrace{Actor: conv.Actor{AgentID: "sub-worker"}, Payload: json.RawMessage(`{}`)}); d.Events[0].TurnID != "abc123" {
		t.Fatalf("sub-worker trace turnId %q", d.Events[0].TurnID)
	}
	sc.fail(say("worker", parley.FinalityTurn), parley.ETURNCONFLICT) // only the owner closes
	sc.ok(say("assistant", parley.FinalityTurn))
	// The turn is closed: the delegates' right to write into it ends with it.
	sc.fail(continuing(say("worker", parley.FinalityNone), 2), parley.EPRECONDITION)
	if m := lastMessage(t, sc.ok(say("worker", parley.FinalityNone))); m.Turn != 3 {
		t.Fatalf("worker now opens a turn of its own: got turn %d", m.Turn)
	}
}

func TestTurnIDRules(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.ok(userSays("u1"))
	// A new turn without replyTo inherits the exchange of the last turn.
	if m := lastMessage(t, sc.ok(say("a", parley.FinalityTurn))); m.TurnID != "u1" {
		t.Fatalf("inherited turnId %q, want u1", m.TurnID)
	}
	explicit := say("b", parley.FinalityNone)
	explicit.TurnID = "nope"
	sc.fail(explicit, parley.EINVALIDVALUE)
	explicit.TurnID = "u1"
	if m := lastMessage(t, sc.ok(explicit)); m.TurnID != "u1" {
		t.Fatalf("explicit turnId %q", m.TurnID)
	}
	other := say("b", parley.FinalityNone)
	other.TurnID = "m1"
	sc.fail(other, parley.EINVALIDVALUE) // continuing a turn: its turnId only
}

func TestThreading(t *testing.T) {
	t.Parallel()
	t.Run("self, unknown and foreign parents", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		self := say("a", parley.FinalityNone)
		self.ID, self.ReplyTo = "x1", "x1"
		e := sc.fail(self, parley.EINVALIDTHREAD)
		if !strings.Contains(e.Message, "itself") {
			t.Fatalf("message %q", e.Message)
		}
		unknown := say("a", parley.FinalityNone)
		unknown.ReplyTo = "ghost"
		sc.fail(unknown, parley.EINVALIDTHREAD)
		// A parent in another conversation is not found by the engine's look-up
		// of (conversation, id), which is what Known.Parent == nil says.
		foreign := say("a", parley.FinalityNone)
		foreign.ReplyTo = "elsewhere"
		sc.fail(foreign, parley.EINVALIDTHREAD)
		bad := say("a", parley.FinalityNone)
		bad.ReplyTo = "not valid!"
		sc.fail(bad, parley.EINVALIDTHREAD)
	})
	t.Run("depth limit: 99 ancestors fine, 100 refused", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		prev := ""
		for i := 0; i < 100; i++ { // a chain of 100: the last has 99 ancestors
			m := say("a", parley.FinalityNone)
			m.ReplyTo = prev
			msg := lastMessage(t, sc.ok(m))
			if msg.Depth != i {
				t.Fatalf("message %d has depth %d", i, msg.Depth)
			}
			prev = msg.ID
		}
		m := say("a", parley.FinalityNone)
		m.ReplyTo = prev // the 101st would have 100 ancestors
		e := sc.fail(m, parley.EINVALIDTHREAD)
		if e.Details["maxDepth"] != 100 {
			t.Fatalf("details %v", e.Details)
		}
	})
	t.Run("a custom depth limit", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.env.Limits.MaxThreadDepth = 3
		m := say("a", parley.FinalityNone)
		m.ReplyTo, m.Known.Parent = "p", &conv.ParentRef{ID: "p", Depth: 1}
		if got := lastMessage(t, sc.ok(m)); got.Depth != 2 {
			t.Fatalf("depth %d", got.Depth)
		}
		m.ID, m.Known.Parent = "", &conv.ParentRef{ID: "p", Depth: 2}
		sc.fail(m, parley.EINVALIDTHREAD)
	})
	t.Run("fan-out is allowed", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(userSays("q"))
		for _, agent := range []string{"a", "b", "c"} {
			m := say(agent, parley.FinalityTurn)
			m.ReplyTo = "q"
			if got := lastMessage(t, sc.ok(m)); got.Depth != 1 || got.TurnID != "q" {
				t.Fatalf("%s: depth %d turnId %q", agent, got.Depth, got.TurnID)
			}
		}
	})
	t.Run("a duplicate id is refused, so no cycle can form", func(t *testing.T) {
		sc := newScript(t, parley.PolicyFree)
		sc.ok(userSays("q"))
		dup := say("a", parley.FinalityNone)
		dup.ID = "q"
		sc.fail(dup, parley.EBUSY)
	})
}

func TestIdempotencyComesFirst(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	m := say("a", parley.FinalityConversation)
	m.ClientRequestID, m.RequestHash = "req-1", "h1"
	sc.ok(m)
	if !sc.s.Closed {
		t.Fatal("not closed")
	}
	m.Known.Prior = &conv.Prior{RequestHash: "h1", Response: []byte(`{"seq":2}`)}
	again, err := conv.Decide(sc.s, m, conv.Env{Now: sc.now})
	if err != nil || string(again.Replay) != `{"seq":2}` || len(again.Events) != 0 {
		t.Fatalf("retry after it closed the conversation: %v %+v", err, again)
	}
	m.Known.Prior.RequestHash = "h2"
	if _, err := conv.Decide(sc.s, m, conv.Env{Now: sc.now}); parley.ErrorCode(err) != parley.EIDEMPOTENCY {
		t.Fatalf("other body: %v", err)
	}
}

func TestIdempotentRetryOfATurnCloser(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	m := say("a", parley.FinalityTurn)
	m.ClientRequestID, m.RequestHash = "req-1", "h1"
	sc.ok(m)
	sc.ok(say("b", parley.FinalityNone)) // b now owns turn 2
	m.Known.Prior = &conv.Prior{RequestHash: "h1", Response: []byte(`{"turn":1}`)}
	d, err := conv.Decide(sc.s, m, conv.Env{Now: sc.now})
	if err != nil || string(d.Replay) != `{"turn":1}` {
		t.Fatalf("retry: %v %s", err, d.Replay)
	}
}

func TestMessageShape(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 129)
	cases := []struct {
		name string
		edit func(*conv.PostMessage)
		code string
	}{
		{"bad id", func(m *conv.PostMessage) { m.ID = "a b" }, parley.EINVALIDVALUE},
		{"long id", func(m *conv.PostMessage) { m.ID = long }, parley.EINVALIDVALUE},
		{"bad agent", func(m *conv.PostMessage) { m.AgentID = "a/b" }, parley.EINVALIDVALUE},
		{"bad role", func(m *conv.PostMessage) { m.Role = "oracle" }, parley.EINVALIDVALUE},
		{"bad finality", func(m *conv.PostMessage) { m.Finality = "forever" }, parley.EINVALIDVALUE},
		{"unknown part", func(m *conv.PostMessage) { m.Parts = []parley.Part{{Type: "hologram"}} }, parley.EINVALIDVALUE},
		{"tool-call without callId", func(m *conv.PostMessage) {
			m.Parts = []parley.Part{{Type: parley.PartToolCall, ToolName: "t", Status: "running"}}
		}, parley.EINVALIDVALUE},
		{"tool-call bad status", func(m *conv.PostMessage) {
			m.Parts = []parley.Part{{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: "done"}}
		}, parley.EINVALIDVALUE},
		{"bad finish", func(m *conv.PostMessage) { m.Parts = []parley.Part{{Type: parley.PartFinish, Reason: "bored"}} }, parley.EINVALIDVALUE},
		{"bad channel", func(m *conv.PostMessage) { m.Channel = &parley.Channel{Type: "slack"} }, parley.EINVALIDVALUE},
		{"bad metadata", func(m *conv.PostMessage) { m.Metadata = json.RawMessage(`{`) }, parley.EINVALID},
		{"too many parts", func(m *conv.PostMessage) { m.Parts = make([]parley.Part, 513); fill(m.Parts) }, parley.ETOOLARGE},
		{"too much text", func(m *conv.PostMessage) {
			m.Parts = []parley.Part{{Type: parley.PartText, Text: strings.Repeat("x", 600<<10)}}
		}, parley.ETOOLARGE},
		{"too much metadata", func(m *conv.PostMessage) { m.Metadata = json.RawMessage(`"` + strings.Repeat("x", 17<<10) + `"`) }, parley.ETOOLARGE},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := newScript(t, parley.PolicyFree)
			m := say("a", parley.FinalityNone)
			m.ID = "ok-id"
			c.edit(&m)
			sc.fail(m, c.code)
		})
	}
	sc := newScript(t, parley.PolicyFree)
	m := say("a", parley.FinalityTurn)
	m.Parts = []parley.Part{{Type: parley.PartText, Text: "see "}, {Type: parley.PartToolCall, CallID: "c1", ToolName: "search", Status: "completed", Args: json.RawMessage(`{"q":1}`)},
		{Type: parley.PartText, Text: "done"}, {Type: parley.PartFinish, Reason: parley.FinishEndTurn}}
	got := lastMessage(t, sc.ok(m))
	if got.Content != "see done" || got.Status != parley.StatusComplete || len(got.Parts) != 4 {
		t.Fatalf("message = %+v", got)
	}
}

func fill(ps []parley.Part) {
	for i := range ps {
		ps[i] = parley.Part{Type: parley.PartText, Text: "x"}
	}
}
