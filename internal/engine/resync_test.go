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
	"github.com/parleyhq/parley/internal/store"
)

// lostAnswerStore commits an append and then, when armed, reports a
// failure without a verdict, as a connection to PostgreSQL lost during
// COMMIT would.
type lostAnswerStore struct {
	store.Store
	armed atomic.Bool
}

func (s *lostAnswerStore) Append(ctx context.Context, p store.AppendParams) error {
	if err := s.Store.Append(ctx, p); err != nil {
		return err
	}
	if s.armed.CompareAndSwap(true, false) {
		return errors.New("connection reset during commit")
	}
	return nil
}

// AppendAsync is Append, on a goroutine of its own.
func (s *lostAnswerStore) AppendAsync(p store.AppendParams, done func(error)) {
	go func() { done(s.Append(context.Background(), p)) }()
}

// TestWriteWithALostAnswerIsPublished: when the store fails without a
// verdict but the write committed, the engine rereads the conversation:
// the head agrees with the log at once, subscribers get the event without
// waiting for another write, and the next write follows it.
func TestWriteWithALostAnswerIsPublished(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := &lostAnswerStore{Store: openStore(t)}
	eng := engine.New(st, engine.Options{})
	defer eng.Close()
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	sub, err := eng.Subscribe(ctx, id, &parley.Position{Seq: 1, Epoch: v.Conversation.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	st.armed.Store(true)
	post := func(mid string) (*engine.MessageResult, error) {
		return eng.PostMessage(ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "a"}, ID: mid, Role: parley.RoleUser, Parts: text("hi"), Finality: parley.FinalityTurn})
	}
	if _, err := post("m1"); err == nil || parley.ErrorCode(err) != parley.EINTERNAL {
		t.Fatalf("the write with a lost answer: %v", err)
	}
	if v, err := eng.Conversation(ctx, id); err != nil || v.Head.LastSeq != 2 {
		t.Fatalf("head after the lost answer: %+v, %v; the log has seq 2", v, err)
	}
	for it := range sub.C {
		if it.Event == nil {
			continue
		}
		if it.Event.Seq != 2 || it.Event.Type != parley.EventMessage {
			t.Fatalf("subscriber got %d %s, want the committed message at seq 2", it.Event.Seq, it.Event.Type)
		}
		break
	}
	if _, err := post("m1"); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("writing m1 again: %v, want busy: it is there", err)
	}
	if r, err := post("m2"); err != nil || r.Seq != 3 {
		t.Fatalf("the next write: %+v, %v", r, err)
	}
}
