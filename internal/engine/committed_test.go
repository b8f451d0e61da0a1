package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// unsyncedStore is a store that tells a commit before it is durable: it
// commits each append (the store's Append), says so (Committed), and holds
// back the answer, as a store whose log is still being synced would, until
// released.
type unsyncedStore struct {
	store.Store
	release chan struct{}
}

func (s unsyncedStore) AppendAsync(p store.AppendParams, done func(error)) {
	committed := p.Committed
	p.Committed = nil
	go func() {
		err := s.Store.Append(context.Background(), p)
		if err == nil && committed != nil {
			committed()
		}
		<-s.release
		done(err)
	}()
}

// streamingWatched makes a conversation in which agent bot streams message
// "m", and a subscription to it.
func streamingWatched(ctx context.Context, t *testing.T, eng *engine.Engine) (string, conv.Actor, *engine.Subscription) {
	t.Helper()
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"bot"}})
	if err != nil {
		t.Fatal(err)
	}
	id, bot := v.Conversation.ID, conv.Actor{AgentID: "bot"}
	if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: "m", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	sub, err := eng.Subscribe(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id, bot, sub
}

// TestPublishedOnceCommitted: a runner's delta reaches the conversation's
// subscribers, and the conversation's state, once its append is committed
// (the store calls Committed), while its acknowledgement waits until the
// append is durable (the store answers); the deltas sent meanwhile are
// decided and committed too, rather than waiting for the sync.
func TestPublishedOnceCommitted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := unsyncedStore{Store: openStore(t), release: make(chan struct{})}
	eng := engine.New(s, engine.Options{})
	defer eng.Close()
	defer close(s.release) // before Close, which waits for the answers
	id, bot, sub := streamingWatched(ctx, t, eng)
	defer sub.Close()

	var acks []*engine.Ack
	var got, sent string
	for _, d := range []string{"one ", "two ", "three"} {
		acks = append(acks, eng.StreamTextAsync(ctx, id, conv.StreamText{Actor: bot, MessageID: "m", Delta: d}))
		sent += d
		for got != sent {
			select {
			case it := <-sub.C:
				if it.Event != nil && it.Event.Type == parley.EventChunk {
					var ch parley.Chunk
					_ = json.Unmarshal(it.Event.Data, &ch)
					got += ch.Content
				}
			case <-ctx.Done():
				t.Fatalf("subscribers got %q, want %q before any append is durable", got, "one two three")
			}
		}
	}
	for i, a := range acks {
		if a.Ready() {
			t.Fatalf("delta %d was acknowledged before its append was durable", i)
		}
	}
	if m, err := eng.MessageState(ctx, id, "m"); err != nil || m.Content != "one two three" {
		t.Fatalf("the message as the engine holds it: %+v, %v", m, err)
	}
	s.release <- struct{}{}
	s.release <- struct{}{}
	s.release <- struct{}{}
	for i, a := range acks {
		if _, err := a.Wait(); err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
	}
}
