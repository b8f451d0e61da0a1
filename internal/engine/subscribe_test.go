package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// TestResumeMergesHistoryAndLive subscribes from an old position while a
// writer keeps appending: the subscriber gets every later event exactly once.
func TestResumeMergesHistoryAndLive(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree)
	for i := 0; i < 50; i++ {
		b.say(t, id, "a", "before", parley.FinalityTurn)
	}
	v, _ := b.eng.Conversation(b.ctx, id)
	sub, err := b.eng.Subscribe(b.ctx, id, &parley.Position{Seq: 10, Epoch: v.Head.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !sub.Init.Recovered || sub.Init.Position.Seq != 10 {
		t.Fatalf("init = recovered %v at %d, want recovered at 10", sub.Init.Recovered, sub.Init.Position.Seq)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			b.say(t, id, "a", "during", parley.FinalityTurn)
		}
	}()
	want := int64(11)
	last := int64(1 + 150)
	for it := range sub.C {
		if g := it.Guidance; g != nil {
			if g.AfterSeq < want-1 {
				t.Fatalf("stale guidance after seq %d delivered after seq %d", g.AfterSeq, want-1)
			}
			if g.AfterSeq == last && want == last+1 {
				break // the guidance of the last write always arrives, after its event
			}
			continue
		}
		if it.Event.Seq != want {
			t.Fatalf("got seq %d, want %d", it.Event.Seq, want)
		}
		want++
	}
	<-done
	if want != last+1 {
		t.Fatalf("stream ended at seq %d, want %d", want-1, last)
	}
}

func TestStaleEpochGetsSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{SnapshotMessages: 3})
	id := b.conversation(t, parley.PolicyFree)
	for i := 0; i < 5; i++ {
		b.say(t, id, "a", "m", parley.FinalityTurn)
	}
	sub, err := b.eng.Subscribe(b.ctx, id, &parley.Position{Seq: 2, Epoch: "not-this-one"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	in := sub.Init
	if in.Recovered || in.Position.Seq != 6 || len(in.Messages) != 3 || in.Messages[2].Seq != 6 {
		t.Fatalf("init = recovered %v at %d with %d messages; want a snapshot at 6 with the 3 latest", in.Recovered, in.Position.Seq, len(in.Messages))
	}
	if in.Guidance == nil || in.Guidance.Turn != 6 {
		t.Fatalf("snapshot guidance = %+v, want turn 6", in.Guidance)
	}
}

func TestSlowSubscriberIsDisconnectedNotWaitedFor(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{SubscriberBuffer: 64})
	id := b.conversation(t, parley.PolicyFree)
	slow, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	// The writer goes in lockstep with the fast reader, so only the slow one,
	// which never reads, can fall behind; the writes must not wait for it.
	for want := int64(2); want <= 401; want++ {
		if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "a"}, Role: parley.RoleAssistant, Parts: text("x"), Finality: parley.FinalityTurn}); err != nil {
			t.Fatal(err)
		}
		for it := range fast.C {
			if it.Event == nil {
				continue
			}
			if it.Event.Seq != want {
				t.Fatalf("fast subscriber got seq %d, want %d", it.Event.Seq, want)
			}
			break
		}
	}
	if err := slow.Err(); !errors.Is(err, feed.ErrSlow) {
		t.Fatalf("slow subscriber ended with %v, want ErrSlow", err)
	}
}

// gatedStore holds the first read of history made after arm until open
// is closed, so that a write can land while a subscriber catches up.
type gatedStore struct {
	store.Store
	armed atomic.Bool
	held  chan struct{} // closed when a read is held
	open  chan struct{}
}

func (g *gatedStore) ReadEvents(ctx context.Context, p store.ReadEventsParams) ([]parley.Event, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.open
	}
	return g.Store.ReadEvents(ctx, p)
}

// TestGuidanceOvertakenByHistoryIsNotLost: a subscriber catching up from
// the log reads past a guidance change that waits in its live queue; the
// change still reaches it (as of the events sent), instead of being dropped
// as stale and leaving the subscriber on the guidance of its init.
func TestGuidanceOvertakenByHistoryIsNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	gs := &gatedStore{Store: b.db, held: make(chan struct{}), open: make(chan struct{})}
	eng := engine.New(gs, engine.Options{})
	defer eng.Close()
	v, err := eng.CreateConversation(b.ctx, parley.Conversation{TurnPolicy: parley.PolicyRoundRobin, Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	say := func(agent string) {
		t.Helper()
		if _, err := eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: agent}, Role: parley.RoleAssistant, Parts: text("x"), Finality: parley.FinalityTurn}); err != nil {
			t.Fatal(err)
		}
	}
	say("a") // guidance: b starts turn 2
	gs.armed.Store(true)
	sub, err := eng.Subscribe(b.ctx, id, &parley.Position{Seq: 1, Epoch: v.Conversation.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if g := sub.Init.Guidance; g.NextAgentID != "b" {
		t.Fatalf("init guidance %+v", g)
	}
	<-gs.held // the subscriber reads its history now
	say("b")  // guidance: a starts turn 3, queued behind the event
	// A note that changes no guidance, so that the log read goes past it.
	if _, err := eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "ops", Admin: true}, Role: parley.RoleSystem, Parts: text("note")}); err != nil {
		t.Fatal(err)
	}
	close(gs.open)
	var last *parley.Guidance
	for seen := 0; seen < 3; {
		it := <-sub.C
		if it.Event != nil {
			seen++
		}
		if it.Guidance != nil {
			last = it.Guidance
		}
	}
	deadline := time.After(5 * time.Second)
	for last == nil || last.NextAgentID != "a" {
		select {
		case it := <-sub.C:
			if it.Guidance != nil {
				last = it.Guidance
			}
		case <-deadline:
			t.Fatalf("the subscriber's guidance is %+v; b's message made it a's turn", last)
		}
	}
	if last.Turn != 3 || last.AfterSeq != 4 {
		t.Fatalf("guidance %+v, want a to start turn 3, as of seq 4 (the note)", last)
	}
}
