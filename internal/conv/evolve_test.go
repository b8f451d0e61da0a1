package conv_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Evolve and Head hand out values: a state once made never changes, whatever
// is done with the states and heads made from it.

func TestEvolveLeavesItsInputAlone(t *testing.T) {
	t.Parallel()
	sc := build(t, parley.PolicyFree, []string{"a", "b"},
		say("a", parley.FinalityNone), delegate("a", "w1"), startStreaming("a", "r1"), text("a", "r1"))
	// A state whose conversation holds other participants, evolved with a
	// conversation.created event (as when a history is replaced).
	stale := sc.s
	stale.Conversation.Participants = []string{"x", "y", "z"}
	_ = conv.Evolve(stale, sc.log[0])
	if !slices.Equal(stale.Conversation.Participants, []string{"x", "y", "z"}) {
		t.Fatalf("Evolve wrote into its input's participants: %v", stale.Conversation.Participants)
	}
	// The open turn's delegates and the streams are shared with later states.
	before := mustJSON(sc.s)
	later := conv.Evolve(sc.s, parley.Event{Seq: sc.s.LastSeq + 1, Type: parley.EventDelegation, Turn: 1, TurnID: "m1", AgentID: "a",
		Finality: parley.FinalityNone, Data: []byte(`{"from":"a","to":"w2","turn":1}`)})
	later = conv.Evolve(later, parley.Event{Seq: later.LastSeq + 1, Type: parley.EventChunk, Turn: 1, TurnID: "m1", AgentID: "a",
		Finality: parley.FinalityNone, Data: []byte(`{"messageId":"r1","content":"x"}`)})
	if mustJSON(sc.s) != before || len(later.Open.Delegates) != 2 || streamOf(later, "r1").Chunks != streamOf(sc.s, "r1").Chunks+1 {
		t.Fatalf("Evolve changed its input:\n%s\n%s", before, mustJSON(sc.s))
	}
}

func TestCreateDoesNotWriteIntoTheCallersParticipants(t *testing.T) {
	t.Parallel()
	participants := []string{"a", "b", "c"} // shared by every call, as a config value is
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				s, _, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1", Participants: participants}, conv.Env{Now: epoch0})
				if err != nil || !slices.Equal(s.Conversation.Participants, participants) {
					t.Errorf("Create: %v %v", err, s.Conversation.Participants)
				}
			}
		})
	}
	wg.Wait() // under -race, a write into participants is reported here
}

func TestHeadIsACopy(t *testing.T) {
	t.Parallel()
	sc := build(t, parley.PolicyFree, nil, claim("a", time.Minute), say("a", parley.FinalityNone), delegate("a", "w1"))
	before := mustJSON(sc.s)
	h := sc.s.Head(sc.now)
	h.OpenTurn.Delegates[0] = "intruder"
	h.OpenTurn.Owner = "intruder"
	if mustJSON(sc.s) != before {
		t.Fatal("changing a head changed the state")
	}
}

func TestEvolveWithNoEventsIsTheSameState(t *testing.T) {
	t.Parallel()
	sc := build(t, parley.PolicyFree, nil, say("a", parley.FinalityNone))
	if mustJSON(conv.Evolve(sc.s)) != mustJSON(sc.s) {
		t.Fatal("Evolve with no events changed the state")
	}
}
