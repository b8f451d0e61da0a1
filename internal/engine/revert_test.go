package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// readCounter is a store that counts the reads of messages, by their rows
// or their keys.
type readCounter struct {
	store.Store
	rows atomic.Int64 // message rows read, or asked for by id
}

func (r *readCounter) GetMessage(ctx context.Context, conv, id string) (*parley.Message, error) {
	r.rows.Add(1)
	return r.Store.GetMessage(ctx, conv, id)
}

func (r *readCounter) ListMessages(ctx context.Context, p store.ListMessagesParams) ([]*parley.Message, error) {
	ms, err := r.Store.ListMessages(ctx, p)
	r.rows.Add(int64(len(ms)) + 1)
	return ms, err
}

func (r *readCounter) MessageKey(ctx context.Context, conv, id string) (*store.MessageKey, error) {
	r.rows.Add(1)
	return r.Store.MessageKey(ctx, conv, id)
}

func (r *readCounter) ListMessageKeys(ctx context.Context, p store.ListMessagesParams) ([]store.MessageKey, error) {
	keys, err := r.Store.ListMessageKeys(ctx, p)
	r.rows.Add(int64(len(keys)) + 1)
	return keys, err
}

// TestRevertDecidesWhoFirst: a revert by an agent that takes no part in the
// conversation is refused from the conversation's state, before a message
// is read, the same whether the message exists or not (nothing learned,
// nothing spent on the rows it names); a member's revert that would remove
// another's message is refused, and removes nothing.
func TestRevertDecidesWhoFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	counter := &readCounter{Store: b.db}
	eng := engine.New(counter, engine.Options{})
	t.Cleanup(func() { eng.Close() })
	v, err := eng.CreateConversation(b.ctx, parley.Conversation{Participants: []string{"alice", "carol"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	post := func(agent, mid string) {
		t.Helper()
		if _, err := eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: agent}, ID: mid, Role: parley.RoleAssistant, Parts: text(mid), Finality: parley.FinalityTurn}); err != nil {
			t.Fatal(err)
		}
	}
	post("alice", "a1")
	post("carol", "c1")
	for i := range 50 {
		post("alice", "a"+string(rune('A'+i%26))+string(rune('a'+i/26)))
	}
	counter.rows.Store(0)
	var errs []string
	for _, mid := range []string{"a1", "no-such-message"} {
		_, err := eng.Revert(b.ctx, id, conv.Actor{AgentID: "bob"}, mid)
		if parley.ErrorCode(err) != parley.EFORBIDDEN {
			t.Fatalf("an outsider's revert of %s: %v, want forbidden", mid, err)
		}
		errs = append(errs, parley.ErrorMessage(err))
	}
	if n := counter.rows.Load(); n != 0 {
		t.Fatalf("an outsider's reverts read %d message rows", n)
	}
	if errs[0] != errs[1] {
		t.Fatalf("an outsider learns whether a message exists: %q vs %q", errs[0], errs[1])
	}
	// carol's revert from a1 would remove alice's a1 first: refused.
	_, err = eng.Revert(b.ctx, id, conv.Actor{AgentID: "carol"}, "a1")
	if parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("carol's revert of alice's message: %v, want forbidden", err)
	}
	if ms, _ := b.db.ListMessages(b.ctx, store.ListMessagesParams{ConversationID: id, Limit: 100}); len(ms) != 52 {
		t.Fatalf("%d messages after refused reverts, want 52", len(ms))
	}
}
