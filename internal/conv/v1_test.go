package conv_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestStreamV1: text a v1 runner streams is a chunk naming no message, in
// the runner's turn (the next one, in the exchange of the prompt it
// answers); it needs a v1 conversation and the floor, and empty text
// writes nothing.
func TestStreamV1(t *testing.T) {
	t.Parallel()
	env := conv.Env{Now: epoch0, Limits: conv.DefaultLimits}
	mk := func(format string) conv.State {
		s, events, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1", Participants: []string{"bot", "other"}, Members: []string{"human"}, TurnPolicy: parley.PolicyFree, MessageFormat: format}, env)
		if err != nil {
			t.Fatal(err)
		}
		return conv.Evolve(s, events...)
	}
	decide := func(s conv.State, cmd conv.Command) (conv.State, conv.Decision, error) {
		d, err := conv.Decide(s, cmd, env)
		if err != nil {
			return s, d, err
		}
		return conv.Evolve(s, d.Events...), d, nil
	}
	s := mk("v1")
	s, _, err := decide(s, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "p1", Content: "q", Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err = decide(s, conv.DispatchPrompt{Runner: "bot", Content: "q"})
	if err != nil {
		t.Fatal(err)
	}
	s, d, err := decide(s, conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}, Content: "Hel"})
	if err != nil || len(d.Events) != 1 {
		t.Fatalf("stream: %v, %d events", err, len(d.Events))
	}
	e := d.Events[0]
	if e.Type != parley.EventChunk || string(e.Data) != `{"messageId":"","content":"Hel"}` || e.TurnID != "p1" || e.Turn != s.LastTurn || s.Open == nil || s.Open.Owner != "bot" {
		t.Fatalf("the chunk: %+v (data %s); open %+v", e, e.Data, s.Open)
	}
	if _, d, err := decide(s, conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}}); err != nil || len(d.Events) != 0 {
		t.Fatalf("empty text: %v, %d events", err, len(d.Events))
	}
	if _, _, err := decide(s, conv.StreamV1{Actor: conv.Actor{AgentID: "other"}, Content: "x"}); parley.ErrorCode(err) != parley.ETURNCONFLICT {
		t.Fatalf("another agent, while bot holds the floor: %v", err)
	}
	if _, _, err := decide(s, conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}, Content: strings.Repeat("x", conv.DefaultLimits.MaxTextBytes+1)}); parley.ErrorCode(err) != parley.ETOOLARGE {
		t.Fatalf("text over the limit: %v", err)
	}
	if _, _, err := decide(mk("v2"), conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}, Content: "x"}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("in a v2 conversation: %v", err)
	}
}

// TestStreamV1Texts: the state keeps, for each agent, where the text it
// streams with no message began and its bytes; the texts together are
// bounded as one message's text is; and each ends at the events the
// stream's fold ends it at (rule 9), and at no other.
func TestStreamV1Texts(t *testing.T) {
	t.Parallel()
	env := conv.Env{Now: epoch0, Limits: conv.DefaultLimits}
	s, events, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1", Participants: []string{"bot", "other"}, TurnPolicy: parley.PolicyFree, MessageFormat: "v1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	s = conv.Evolve(s, events...)
	for _, text := range []string{"Hel", "lo"} {
		d, err := conv.Decide(s, conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}, Content: text}, env)
		if err != nil {
			t.Fatal(err)
		}
		s = conv.Evolve(s, d.Events...)
	}
	first := s.LastSeq - 1
	if got := s.Texts["bot"]; len(s.Texts) != 1 || got != (conv.PendingText{Seq: first, Bytes: 5}) {
		t.Fatalf("texts %+v, want bot's from seq %d, 5 bytes", s.Texts, first)
	}
	over := conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}, Content: strings.Repeat("x", conv.DefaultLimits.MaxTextBytes-4)}
	if _, err := conv.Decide(s, over, env); parley.ErrorCode(err) != parley.ETOOLARGE {
		t.Fatalf("text that passes the limit with what is pending: %v", err)
	}
	// A delegate streams into bot's turn: one agent more with text, past
	// MaxStreaming is busy.
	d, err := conv.Decide(s, conv.Delegate{Actor: conv.Actor{AgentID: "bot"}, To: "other"}, env)
	if err != nil {
		t.Fatal(err)
	}
	delegated := conv.Evolve(s, d.Events...)
	one := env
	one.Limits.MaxStreaming = 1
	if _, err := conv.Decide(delegated, conv.StreamV1{Actor: conv.Actor{AgentID: "other"}, Content: "x"}, one); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("a second agent's text, with one at most: %v", err)
	}
	if _, err := conv.Decide(delegated, conv.StreamV1{Actor: conv.Actor{AgentID: "bot"}, Content: "x"}, one); err != nil {
		t.Fatalf("more of the one text, with one at most: %v", err)
	}

	// An event of the log, as Evolve folds it.
	ev := func(typ, agent string, fin parley.Finality, data string) parley.Event {
		return parley.Event{Seq: s.LastSeq + 1, Type: typ, AgentID: agent, Finality: fin, Turn: s.LastTurn, Data: []byte(data)}
	}
	msg := func(typ, agent string, fin parley.Finality) parley.Event {
		return ev(typ, agent, fin, `{"id":"m1","agentId":"`+agent+`","status":"complete","finality":"`+string(fin)+`"}`)
	}
	for _, tc := range []struct {
		name string
		e    parley.Event
		ends bool
	}{
		{"another agent's message", msg(parley.EventMessage, "other", parley.FinalityNone), false},
		{"its message.updated that keeps the turn", msg(parley.EventMessageUpdated, "bot", parley.FinalityNone), false},
		{"another agent's turn.aborted", ev(parley.EventTurnAborted, "other", parley.FinalityTurn, `{"turn":1}`), false},
		{"another agent's prompt.completed", ev(parley.EventPromptCompleted, "other", "", `{"id":"p9"}`), false},
		{"a chunk of a message", ev(parley.EventChunk, "bot", "", `{"messageId":"m1","content":"x"}`), false},
		{"its message", msg(parley.EventMessage, "bot", parley.FinalityNone), true},
		{"its message.updated that closes its turn", msg(parley.EventMessageUpdated, "bot", parley.FinalityTurn), true},
		{"another agent's message that closes the conversation", msg(parley.EventMessage, "other", parley.FinalityConversation), true},
		{"its turn.reset", ev(parley.EventTurnReset, "bot", "", `{"turn":1}`), true},
		{"its turn.aborted", ev(parley.EventTurnAborted, "bot", parley.FinalityTurn, `{"turn":1}`), true},
		{"its prompt.completed", ev(parley.EventPromptCompleted, "bot", "", `{"id":"p9"}`), true},
		{"its prompt.canceled", ev(parley.EventPromptCanceled, "bot", "", `{"id":"p9"}`), true},
		{"its prompt.requeued", ev(parley.EventPromptRequeued, "bot", "", `{"id":"p9"}`), true},
		{"messages.removed", ev(parley.EventMessagesRemoved, "other", "", `{"messageIds":["m0"]}`), true},
	} {
		after := conv.Evolve(s, tc.e)
		if _, kept := after.Texts["bot"]; kept == tc.ends {
			t.Errorf("%s: bot's text kept %v, want %v", tc.name, kept, !tc.ends)
		}
		if _, kept := s.Texts["bot"]; !kept {
			t.Fatalf("%s changed the state it was folded into", tc.name)
		}
	}
}
