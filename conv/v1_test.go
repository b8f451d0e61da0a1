package conv_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
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
