package conv_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Bad input (DESIGN "Limits and bad input"): shape errors are invalid_value
// (or invalid_request for JSON that does not parse), sizes over a bound are
// too_large, and a refused write leaves nothing behind.

func edited(edit func(m *conv.PostMessage)) conv.PostMessage {
	m := say("a", parley.FinalityNone)
	m.ID = "ok-id"
	edit(&m)
	return m
}

func textParts(n, size int) []parley.Part {
	ps := make([]parley.Part, n)
	for i := range ps {
		ps[i] = parley.Part{Type: parley.PartText, Text: strings.Repeat("x", size)}
	}
	return ps
}

func TestMessageShapeRules(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", parley.MaxIDLen+1)
	tool := func(p parley.Part) func(m *conv.PostMessage) {
		return func(m *conv.PostMessage) { m.Parts = []parley.Part{p} }
	}
	var rules []rule
	for _, c := range []struct {
		name string
		edit func(*conv.PostMessage)
		code string
	}{
		{"a bad message id", func(m *conv.PostMessage) { m.ID = "a b" }, parley.EINVALIDVALUE},
		{"a message id of 129 characters", func(m *conv.PostMessage) { m.ID = long }, parley.EINVALIDVALUE},
		{"a message id with a slash", func(m *conv.PostMessage) { m.ID = "a/b" }, parley.EINVALIDVALUE},
		{"a bad agent id", func(m *conv.PostMessage) { m.AgentID = "a/b" }, parley.EINVALIDVALUE},
		{"an empty agent id", func(m *conv.PostMessage) { m.AgentID = "" }, parley.EINVALIDVALUE},
		{"an unknown role", func(m *conv.PostMessage) { m.Role = "oracle" }, parley.EINVALIDVALUE},
		{"an empty role", func(m *conv.PostMessage) { m.Role = "" }, parley.EINVALIDVALUE},
		{"an unknown finality", func(m *conv.PostMessage) { m.Finality = "forever" }, parley.EINVALIDVALUE},
		{"an unknown part type", tool(parley.Part{Type: "hologram"}), parley.EINVALIDVALUE},
		{"a part without type", tool(parley.Part{Text: "x"}), parley.EINVALIDVALUE},
		{"a tool-call without callId", tool(parley.Part{Type: parley.PartToolCall, ToolName: "t", Status: parley.ToolRunning}), parley.EINVALIDVALUE},
		{"a tool-call with a callId of 129 bytes", tool(parley.Part{Type: parley.PartToolCall, CallID: long, ToolName: "t", Status: parley.ToolRunning}), parley.EINVALIDVALUE},
		{"a tool-call without toolName", tool(parley.Part{Type: parley.PartToolCall, CallID: "c", Status: parley.ToolRunning}), parley.EINVALIDVALUE},
		{"a tool-call with a bad status", tool(parley.Part{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: "done"}), parley.EINVALIDVALUE},
		{"a tool-call without status", tool(parley.Part{Type: parley.PartToolCall, CallID: "c", ToolName: "t"}), parley.EINVALIDVALUE},
		{"a bad finish reason", tool(parley.Part{Type: parley.PartFinish, Reason: "bored"}), parley.EINVALIDVALUE},
		{"a finish without reason", tool(parley.Part{Type: parley.PartFinish}), parley.EINVALIDVALUE},
		{"a bad part after good ones", func(m *conv.PostMessage) {
			m.Parts = append(textParts(3, 1), parley.Part{Type: parley.PartFinish, Reason: "later"})
		}, parley.EINVALIDVALUE},
		{"a bad replyTo", func(m *conv.PostMessage) { m.ReplyTo = "not an id" }, parley.EINVALIDTHREAD},
		{"a bad turnId", func(m *conv.PostMessage) { m.TurnID = long }, parley.EINVALIDVALUE},
		{"a bad retryOf", func(m *conv.PostMessage) { m.RetryOf = "not an id" }, parley.EINVALIDVALUE},
		{"a bad next", func(m *conv.PostMessage) { m.Next, m.Finality = "a b", parley.FinalityTurn }, parley.EINVALIDVALUE},
		{"next without finality turn", func(m *conv.PostMessage) { m.Next = "b" }, parley.EINVALIDVALUE},
		{"next with finality conversation", func(m *conv.PostMessage) { m.Next, m.Finality = "b", parley.FinalityConversation }, parley.EINVALIDVALUE},
		{"a channel without id", func(m *conv.PostMessage) { m.Channel = &parley.Channel{Type: "slack"} }, parley.EINVALIDVALUE},
		{"a channel with a bad type", func(m *conv.PostMessage) { m.Channel = &parley.Channel{Type: "sl ack", ID: "x"} }, parley.EINVALIDVALUE},
		{"a channel id of 257 bytes", func(m *conv.PostMessage) {
			m.Channel = &parley.Channel{Type: "slack", ID: strings.Repeat("x", 257)}
		}, parley.EINVALIDVALUE},
		{"metadata that is not JSON", func(m *conv.PostMessage) { m.Metadata = json.RawMessage(`{`) }, parley.EINVALID},
		{"a streaming message with parts", func(m *conv.PostMessage) { m.Streaming = true }, parley.EINVALIDVALUE},
		{"a streaming message that closes", func(m *conv.PostMessage) {
			m.Streaming, m.Parts, m.Finality = true, nil, parley.FinalityTurn
		}, parley.EINVALIDVALUE},
		{"too many parts", func(m *conv.PostMessage) { m.Parts = textParts(conv.DefaultLimits.MaxParts+1, 1) }, parley.ETOOLARGE},
		{"too much text in one part", func(m *conv.PostMessage) { m.Parts = textParts(1, conv.DefaultLimits.MaxTextBytes+1) }, parley.ETOOLARGE},
		{"too much text across parts", func(m *conv.PostMessage) {
			m.Parts = textParts(2, conv.DefaultLimits.MaxTextBytes/2+1)
		}, parley.ETOOLARGE},
		{"too much in tool args and results", func(m *conv.PostMessage) {
			big := json.RawMessage(`"` + strings.Repeat("x", conv.DefaultLimits.MaxMessageBytes/2) + `"`)
			m.Parts = []parley.Part{{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: parley.ToolCompleted, Args: big, Result: big}}
		}, parley.ETOOLARGE},
		{"too much metadata", func(m *conv.PostMessage) {
			m.Metadata = json.RawMessage(`"` + strings.Repeat("x", conv.DefaultLimits.MaxMetadataBytes) + `"`)
		}, parley.ETOOLARGE},
	} {
		rules = append(rules, rule{name: c.name + " is " + c.code, cmd: edited(c.edit), code: c.code})
	}
	for _, c := range []struct {
		name string
		edit func(*conv.PostMessage)
	}{
		{"parts at the limit", func(m *conv.PostMessage) { m.Parts = textParts(conv.DefaultLimits.MaxParts, 1) }},
		{"text at the limit", func(m *conv.PostMessage) { m.Parts = textParts(2, conv.DefaultLimits.MaxTextBytes/2) }},
		{"metadata at the limit", func(m *conv.PostMessage) {
			m.Metadata = json.RawMessage(`"` + strings.Repeat("x", conv.DefaultLimits.MaxMetadataBytes-2) + `"`)
		}},
		{"no parts", func(m *conv.PostMessage) { m.Parts = nil }},
		{"a tool role", func(m *conv.PostMessage) { m.Role = parley.RoleTool }},
		{"every part kind", func(m *conv.PostMessage) {
			m.Parts = []parley.Part{{Type: parley.PartText, Text: "see "}, {Type: parley.PartToolCall, CallID: "c1", ToolName: "search", Status: parley.ToolCompleted},
				{Type: parley.PartError, Message: "oops"}, {Type: parley.PartText, Text: "done"}, {Type: parley.PartFinish, Reason: parley.FinishEndTurn}}
		}},
		{"a channel", func(m *conv.PostMessage) { m.Channel = &parley.Channel{Type: "slack", ID: "C1/x y"} }},
		{"an id of 128 characters", func(m *conv.PostMessage) { m.ID = strings.Repeat("A.b_c:d-", 16) }},
	} {
		rules = append(rules, rule{name: c.name + " is fine", cmd: edited(c.edit), check: func(t *testing.T, o outcome) {
			m := lastMessage(t, o.d)
			if m.Status != parley.StatusComplete || m.Content != parley.TextContent(m.Parts) || m.Parts == nil {
				t.Fatalf("message %+v", m)
			}
		}})
	}
	runRules(t, rules)
}

func TestMessageLimitsAreConfigurable(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.env.Limits.MaxParts, sc.env.Limits.MaxTextBytes, sc.env.Limits.MaxMetadataBytes = 2, 10, 8
	sc.ok(edited(func(m *conv.PostMessage) {
		m.ID, m.Parts, m.Metadata = "m1", textParts(2, 5), json.RawMessage(`"123456"`)
	}))
	sc.fail(edited(func(m *conv.PostMessage) { m.Parts = textParts(3, 1) }), parley.ETOOLARGE)
	sc.fail(edited(func(m *conv.PostMessage) { m.Parts = textParts(2, 6) }), parley.ETOOLARGE)
	sc.fail(edited(func(m *conv.PostMessage) { m.Metadata = json.RawMessage(`"1234567"`) }), parley.ETOOLARGE)
	sc.fail(conv.PostTrace{Actor: actor("a"), Payload: json.RawMessage(`"1234567"`)}, parley.ETOOLARGE)
	checkInvariants(sc)
}

func TestTraceShapeRules(t *testing.T) {
	t.Parallel()
	runRules(t, []rule{
		{name: "a bad trace id is invalid_value", cmd: conv.PostTrace{Actor: actor("a"), ID: "bad id"}, code: parley.EINVALIDVALUE},
		{name: "a bad agent id is invalid_value", cmd: conv.PostTrace{Actor: actor("a b")}, code: parley.EINVALIDVALUE},
		{name: "a bad turnId is invalid_value", cmd: conv.PostTrace{Actor: actor("a"), TurnID: "a b"}, code: parley.EINVALIDVALUE},
		{name: "a payload that is not JSON is invalid_request", cmd: conv.PostTrace{Actor: actor("a"), Payload: json.RawMessage(`{"x":`)}, code: parley.EINVALID},
		{name: "a payload over the limit is too_large",
			cmd: conv.PostTrace{Actor: actor("a"), Payload: json.RawMessage(`"` + strings.Repeat("x", conv.DefaultLimits.MaxMetadataBytes) + `"`)}, code: parley.ETOOLARGE},
		{name: "a trace without payload is fine", cmd: conv.PostTrace{Actor: actor("a")}, check: wantEvents("trace")},
		{name: "a trace's data holds its id and payload", cmd: conv.PostTrace{Actor: actor("a"), ID: "t-1", Payload: json.RawMessage(`{"k": 1}`)},
			check: func(t *testing.T, o outcome) {
				var tr parley.Trace
				if err := json.Unmarshal(o.d.Events[0].Data, &tr); err != nil || tr.ID != "t-1" || string(tr.Payload) != `{"k":1}` {
					t.Fatalf("trace data %s (%v)", o.d.Events[0].Data, err)
				}
			}},
	})
}

func TestUnknownCommandIsInvalidRequest(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	_, err := conv.Decide(sc.s, nil, conv.Env{Now: sc.now})
	wantCode(t, err, parley.EINVALID)
}

func TestCreateRules(t *testing.T) {
	t.Parallel()
	env := conv.Env{Now: epoch0}
	ok := parley.Conversation{ID: "c1", Epoch: "e1", Participants: []string{"a", "b"}}
	many := make([]string, conv.DefaultLimits.MaxParticipants+1)
	for i := range many {
		many[i] = "agent-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	for _, c := range []struct {
		name string
		edit func(*parley.Conversation)
		code string
	}{
		{"a bad id", func(c *parley.Conversation) { c.ID = "c 1" }, parley.EINVALIDVALUE},
		{"an unknown turn policy", func(c *parley.Conversation) { c.TurnPolicy = "lottery" }, parley.EINVALIDVALUE},
		{"an unknown message format", func(c *parley.Conversation) { c.MessageFormat = "v9" }, parley.EINVALIDVALUE},
		{"a bad participant", func(c *parley.Conversation) { c.Participants = []string{"a", "b c"} }, parley.EINVALIDVALUE},
		{"a participant listed twice", func(c *parley.Conversation) { c.Participants = []string{"a", "b", "a"} }, parley.EINVALIDVALUE},
		{"too many participants", func(c *parley.Conversation) { c.Participants = many }, parley.ETOOLARGE},
		{"a title over 512 bytes", func(c *parley.Conversation) { c.Title = strings.Repeat("t", 513) }, parley.ETOOLARGE},
		{"metadata that is not JSON", func(c *parley.Conversation) { c.Metadata = json.RawMessage(`{`) }, parley.EINVALID},
		{"metadata over the limit", func(c *parley.Conversation) {
			c.Metadata = json.RawMessage(`"` + strings.Repeat("x", conv.DefaultLimits.MaxMetadataBytes) + `"`)
		}, parley.ETOOLARGE},
	} {
		t.Run(c.name+" is "+c.code, func(t *testing.T) {
			t.Parallel()
			cv := ok
			c.edit(&cv)
			_, events, err := conv.Create(cv, env)
			wantCode(t, err, c.code)
			if events != nil {
				t.Fatalf("refused but gave %s", types(events))
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		s, events, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1"}, conv.Env{Now: epoch0.Add(1500 * time.Microsecond)})
		if err != nil {
			t.Fatal(err)
		}
		c := s.Conversation
		if c.TurnPolicy != parley.PolicyRoundRobin || c.MessageFormat != "v2" || c.Participants == nil || !c.CreatedAt.Equal(epoch0.Add(time.Millisecond)) {
			t.Fatalf("conversation %+v", c)
		}
		if len(events) != 1 || events[0].Seq != 1 || s.LastSeq != 1 || s.LastTurn != 0 || s.Open != nil || s.Closed {
			t.Fatalf("events %s state %s", types(events), mustJSON(s))
		}
		var back parley.Conversation
		if err := json.Unmarshal(events[0].Data, &back); err != nil || mustJSON(back) != mustJSON(c) {
			t.Fatalf("event data %s", events[0].Data)
		}
	})
}
