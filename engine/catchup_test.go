package engine_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
)

// TestRefusalOnStaleStateIsChecked: two engines share one store (as two
// nodes share PostgreSQL) and hear nothing of each other. Engine B caches
// the conversation while alice holds the turn; A sees her end it and bob
// take the next. B, asked by alice to claim the turn after bob's, would
// refuse on its cached state (alice's turn still open); it checks the
// log's head first, catches up, and decides on the current state. A
// subscriber on B gets what A wrote, once the catch-up folds it in.
func TestRefusalOnStaleStateIsChecked(t *testing.T) {
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree, "alice", "bob")
	b.say(t, id, "alice", "opening", parley.FinalityNone) // turn 1, alice's, open
	other := engine.New(b.db, engine.Options{})
	defer other.Close()
	sub, err := other.Subscribe(b.ctx, id, &parley.Position{Seq: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	b.say(t, id, "alice", "done", parley.FinalityTurn) // on A: turn 1 ends
	b.say(t, id, "bob", "mine", parley.FinalityTurn)   // turn 2, bob's, ends
	// On B, whose cache still has turn 1 open: alice claims turn 3.
	r, err := other.Claim(b.ctx, id, conv.ClaimTurn{Actor: conv.Actor{AgentID: "alice"}, TTL: time.Minute})
	if err != nil {
		t.Fatalf("a claim decided on stale state: %v", err)
	}
	if r.Turn != 3 {
		t.Fatalf("claimed turn %d, want 3", r.Turn)
	}
	head, err := b.db.LastSeq(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for next := int64(1); next <= head; {
		it, ok := <-sub.C
		if !ok {
			t.Fatalf("B's subscription ended at seq %d of %d: %v", next, head, sub.Err())
		}
		if it.Event == nil {
			continue
		}
		if it.Event.Seq != next {
			t.Fatalf("B's subscriber got seq %d, want %d", it.Event.Seq, next)
		}
		next++
	}
}
