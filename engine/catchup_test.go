package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/store"
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

// overtaken is a store on which another node always gets there first: each
// append is preceded by one from elsewhere, so that it finds the log moved
// on. Its Exclusive is the store's own.
type overtaken struct {
	store.Store
	elsewhere func()
}

func (o overtaken) Append(ctx context.Context, p store.AppendParams) error {
	o.elsewhere()
	return o.Store.Append(ctx, p)
}

// TestOvertakenWriterStillWrites: node B's writes into a conversation that
// node A writes without pause (a runner streaming at full speed there) are
// overtaken at every optimistic attempt. After two, B decides holding the
// conversation's lock in the store, which no writer can overtake: its
// message is written, once, on the log's head, and not refused as busy.
func TestOvertakenWriterStillWrites(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	id := a.conversation(t, parley.PolicyFree, "alice", "bob")
	n := 0
	elsewhere := func() {
		n++
		a.say(t, id, "alice", fmt.Sprintf("streaming %d", n), parley.FinalityTurn)
	}
	b := engine.New(overtaken{Store: a.db, elsewhere: elsewhere}, engine.Options{Shared: true})
	defer b.Close()
	for i := range 3 {
		r, err := b.PostMessage(a.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "bob"}, Role: parley.RoleAssistant, Parts: text(fmt.Sprint("bob ", i)), Finality: parley.FinalityTurn})
		if err != nil {
			t.Fatalf("bob's message %d, written on node B: %v", i, err)
		}
		head, err := a.db.LastSeq(a.ctx, id)
		if err != nil || r.Message.Seq != head {
			t.Fatalf("bob's message %d at seq %d, the log's head is %d (%v)", i, r.Message.Seq, head, err)
		}
	}
	bobs := 0
	for _, e := range a.events(t, id) {
		if e.AgentID == "bob" {
			bobs++
		}
	}
	if bobs != 3 || n < 6 {
		t.Fatalf("%d of bob's messages written, %d of alice's in between; want 3 and at least 6", bobs, n)
	}
}
