package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// TestDeleteEndsSubscriptions: a subscription of a deleted conversation
// ends with not_found, and later commands get not_found too.
func TestDeleteEndsSubscriptions(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree, "a")
	sub, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.eng.DeleteConversation(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	for range sub.C {
	}
	if err := sub.Err(); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("the subscription ended with %v, want not_found", err)
	}
	if _, err := b.eng.Conversation(b.ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("reading a deleted conversation: %v", err)
	}
	if err := b.eng.DeleteConversation(b.ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("deleting it again: %v", err)
	}
}

// deletedRunners is the Runners of a node that records which
// conversations it was told were deleted.
type deletedRunners struct {
	mu      sync.Mutex
	deleted []string
}

func (*deletedRunners) Agents(conv.State) []string { return nil }
func (*deletedRunners) Here(string) bool           { return false }
func (*deletedRunners) AgentWide() bool            { return false }
func (*deletedRunners) Changed(engine.Change)      {}
func (r *deletedRunners) Deleted(id string, err *parley.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err.Code == parley.ENOTFOUND {
		r.deleted = append(r.deleted, id)
	}
}

func (r *deletedRunners) told() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deleted)
}

// endsNotFound waits for a subscription to end and fails the test unless
// it ended with not_found.
func endsNotFound(t *testing.T, sub *engine.Subscription, node string) {
	t.Helper()
	for range sub.C {
	}
	if err := sub.Err(); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("node %s's subscription ended with %v, want not_found", node, err)
	}
}

// TestDeleteOnAnotherNodeEndsItsFollowers: nodes A and B share one store.
// A conversation deleted through A ends B's subscription with not_found
// and tells B's runners, both when B hears of the delete (a notice marked
// deleted) and when it hears nothing and finds it by looking at the heads
// of what it follows (KeepCaughtUp); B answers not_found after.
func TestDeleteOnAnotherNodeEndsItsFollowers(t *testing.T) {
	for _, heard := range []bool{true, false} {
		t.Run(fmt.Sprintf("heard=%v", heard), func(t *testing.T) {
			a := setup(t, engine.Options{Shared: true})
			id := a.conversation(t, parley.PolicyFree, "alice")
			b := engine.New(a.db, engine.Options{Shared: true})
			defer b.Close()
			runners := &deletedRunners{}
			b.SetRunners(runners)
			sub, err := b.Subscribe(a.ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			a.say(t, id, "alice", "hi", parley.FinalityTurn)
			if err := a.eng.DeleteConversation(a.ctx, id); err != nil {
				t.Fatal(err)
			}
			if heard {
				b.HandleNotice(feed.Notice{ConversationID: id, Deleted: true})
			} else {
				ctx, cancel := context.WithCancel(a.ctx)
				defer cancel()
				go b.KeepCaughtUp(ctx, 10*time.Millisecond)
			}
			endsNotFound(t, sub, "B")
			if told := runners.told(); !slices.Equal(told, []string{id}) {
				t.Fatalf("B's runners were told of the deletes of %v, want [%s]", told, id)
			}
			if _, err := b.Conversation(a.ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
				t.Fatalf("B reads the deleted conversation: %v", err)
			}
		})
	}
}

// remade deletes conversation id through node a and makes it again under
// the same id with other participants, bob alone, who says one thing:
// its log is then at seq 2, as the deleted one's was.
func remade(t *testing.T, a *bundle, id string) parley.Conversation {
	t.Helper()
	if err := a.eng.DeleteConversation(a.ctx, id); err != nil {
		t.Fatal(err)
	}
	v, err := a.eng.CreateConversation(a.ctx, parley.Conversation{ID: id, Participants: []string{"bob"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	a.say(t, id, "bob", "new", parley.FinalityNone)
	return v.Conversation
}

// TestConversationMadeAgainIsNotTheCachedOne: node B caches a
// conversation of alice's (a subscriber) and hears nothing of node A,
// which deletes it and makes it again under the same id, of bob's, at
// the same seq. B must answer from the conversation the store holds: it
// shows the new one, refuses alice (no longer a participant) rather than
// writing her message into the new log, takes bob's, and its old
// subscriber ended with not_found.
func TestConversationMadeAgainIsNotTheCachedOne(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	id := a.conversation(t, parley.PolicyFree, "alice")
	b := engine.New(a.db, engine.Options{Shared: true})
	defer b.Close()
	sub, err := b.Subscribe(a.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	a.say(t, id, "alice", "old", parley.FinalityNone) // seq 2
	if _, err := b.Conversation(a.ctx, id); err != nil {
		t.Fatal(err)
	}
	made := remade(t, a, id)

	v, err := b.Conversation(a.ctx, id)
	if err != nil || v.Conversation.Epoch != made.Epoch || !slices.Equal(v.Conversation.Participants, []string{"bob"}) || v.Head.LastSeq != 2 {
		t.Fatalf("B shows %+v (%v); want the conversation made again: epoch %s, bob's, at seq 2", v, err, made.Epoch)
	}
	endsNotFound(t, sub, "B")
	_, err = b.PostMessage(a.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "alice"}, Role: parley.RoleAssistant, Parts: text("ghost"), Finality: parley.FinalityNone})
	if parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("alice posts through B into bob's conversation: %v, want forbidden", err)
	}
	if _, err := b.PostMessage(a.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "bob"}, Role: parley.RoleAssistant, Parts: text("again"), Finality: parley.FinalityTurn}); err != nil {
		t.Fatalf("bob posts through B: %v", err)
	}
	var agents []string
	for _, ev := range a.events(t, id) {
		agents = append(agents, ev.AgentID)
	}
	if want := []string{"", "bob", "bob"}; !slices.Equal(agents[1:], want[1:]) || len(agents) != len(want) {
		t.Fatalf("the log made again is written by %q, want %q", agents, want)
	}
}

// interloper is a store on which, once armed, another node acts just
// before this one's next append: after this node decided on the head it
// saw, before the append lands.
type interloper struct {
	store.Store
	before *atomic.Pointer[func()]
}

func (s interloper) Append(ctx context.Context, p store.AppendParams) error {
	if f := s.before.Swap(nil); f != nil {
		(*f)()
	}
	return s.Store.Append(ctx, p)
}

// AppendAsync is Append, on a goroutine of its own.
func (s interloper) AppendAsync(p store.AppendParams, done func(error)) {
	go func() { done(s.Append(context.Background(), p)) }()
}

// TestCommandInFlightMeetsAConversationMadeAgain: node B decides alice's
// message on the head it just looked at; before its append lands, node A
// deletes the conversation and makes it again, of bob's, at that very
// seq. B's append must not land in the new conversation: B finds its
// conversation gone and decides the message again on the new one, which
// refuses alice. Deleted without being made again, the message gets
// not_found.
func TestCommandInFlightMeetsAConversationMadeAgain(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	before := new(atomic.Pointer[func()])
	b := engine.New(interloper{Store: a.db, before: before}, engine.Options{Shared: true})
	defer b.Close()
	post := func(id string) error {
		_, err := b.PostMessage(a.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "alice"}, Role: parley.RoleAssistant, Parts: text("ghost"), Finality: parley.FinalityNone})
		return err
	}

	id := a.conversation(t, parley.PolicyFree, "alice")
	a.say(t, id, "alice", "old", parley.FinalityNone) // seq 2
	remake := func() { remade(t, a, id) }
	before.Store(&remake)
	if err := post(id); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("alice's message decided on the deleted conversation: %v, want forbidden on the one made again", err)
	}
	for _, ev := range a.events(t, id) {
		if ev.AgentID == "alice" {
			t.Fatalf("alice's message was written into bob's conversation at seq %d", ev.Seq)
		}
	}

	gone := a.conversation(t, parley.PolicyFree, "alice")
	if _, err := b.Conversation(a.ctx, gone); err != nil {
		t.Fatal(err)
	}
	del := func() {
		if err := a.eng.DeleteConversation(a.ctx, gone); err != nil {
			t.Error(err)
		}
	}
	before.Store(&del)
	if err := post(gone); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("alice's message to a conversation deleted meanwhile: %v, want not_found", err)
	}
}

// TestLateDeleteNoticeKeepsTheNewConversation: node B hears of a delete
// only after the conversation was made again and B follows the new one.
// The notice is stale: B looks at the head, finds the conversation it
// follows current, and its subscriber goes on.
func TestLateDeleteNoticeKeepsTheNewConversation(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	id := a.conversation(t, parley.PolicyFree, "alice")
	b := engine.New(a.db, engine.Options{Shared: true})
	defer b.Close()
	if _, err := b.Conversation(a.ctx, id); err != nil {
		t.Fatal(err)
	}
	remade(t, a, id)
	sub, err := b.Subscribe(a.ctx, id, &parley.Position{Seq: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	b.HandleNotice(feed.Notice{ConversationID: id, Deleted: true})
	seq := a.say(t, id, "bob", "still here", parley.FinalityTurn).Seq
	b.CatchUp(id, seq)
	for want := int64(1); want <= seq; want++ {
		if ev := nextEvent(t, sub, 10*time.Second); ev.Seq != want {
			t.Fatalf("B's subscriber got seq %d, want %d", ev.Seq, want)
		}
	}
}
