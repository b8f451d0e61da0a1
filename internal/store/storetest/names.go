package storetest

import (
	"testing"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testNamesTakenOnce: the ids an append takes (AppendParams.Names) stay
// taken, in their conversation only, through a revert, until the
// conversation is deleted; an append that takes a taken id is refused
// whole.
func testNamesTakenOnce(t *testing.T, s store.Store) {
	id, other := newConversation(t, s), newConversation(t, s)
	taken := func(conv, name string) bool {
		t.Helper()
		ok, err := s.IDTaken(ctx(t), conv, name)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	m := message(id, "m1", 2, "", 0)
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")},
		Names: []string{"m1", "p1"}, Messages: []*parley.Message{m}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if !taken(id, "m1") || !taken(id, "p1") || taken(id, "m2") || taken(other, "m1") {
		t.Fatal("IDTaken does not say what the append took, in its conversation only")
	}

	// Another writer's message under a taken id: refused, and none of its
	// append is written (not its events, its row, nor its other names).
	intruder := message(id, "m1", 3, "", 0)
	intruder.AgentID, intruder.Content = "b", "b's words"
	intruder.Parts = []parley.Part{{Type: parley.PartText, Text: "b's words"}}
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "b")},
		Names: []string{"p2", "m1"}, Messages: []*parley.Message{intruder}, State: []byte(`{}`)})
	wantCode(t, err, parley.EBUSY)
	if e, ok := err.(*parley.Error); !ok || e.Details["id"] != "m1" {
		t.Fatalf("the refusal %v does not name the id taken", err)
	}
	if h, err := s.Head(ctx(t), id); err != nil || h.Seq != 2 {
		t.Fatalf("after a refused append the head is %+v (%v), want seq 2", h, err)
	}
	if got, err := s.GetMessage(ctx(t), id, "m1"); err != nil || got.AgentID != "a" || got.Content != "m1" {
		t.Fatalf("message m1 is now %+v (%v): the refused append rewrote it", got, err)
	}
	if taken(id, "p2") {
		t.Fatal("a refused append took one of its names")
	}

	// A removed message's id stays taken.
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "a")},
		RemoveMessages: []string{"m1"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if !taken(id, "m1") {
		t.Fatal("a reverted message's id is free again")
	}
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 3, Events: []parley.Event{event(id, 4, "b")},
		Names: []string{"m1"}, Messages: []*parley.Message{intruder}, State: []byte(`{}`)})
	wantCode(t, err, parley.EBUSY)

	// An id is taken in one conversation only; an import's appends take
	// names too, and an aborted import gives them back.
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: other, ExpectSeq: 1, Events: []parley.Event{event(other, 2, "a")},
		Names: []string{"m1"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	imp := uuid.NewString()
	lease := &store.ImportLease{Owner: "names-test", Expires: parley.NewTime(t0.Add(1e12))}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: parley.Conversation{ID: imp, Epoch: "e", CreatedAt: t0},
		Events: []parley.Event{event(imp, 1, "")}, State: []byte(`{}`), Import: lease}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: imp, ExpectSeq: 1, Events: []parley.Event{event(imp, 2, "a")},
		Names: []string{"q1"}, State: []byte(`{}`), Import: lease}); err != nil {
		t.Fatal(err)
	}
	if !taken(imp, "q1") {
		t.Fatal("an import's append took no name")
	}
	if err := s.AbortImport(ctx(t), imp, lease.Owner); err != nil {
		t.Fatal(err)
	}
	if taken(imp, "q1") {
		t.Fatal("an aborted import's names are still taken")
	}

	// Deleting the conversation frees its names.
	if err := s.DeleteConversation(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	if taken(id, "m1") || taken(id, "p1") || !taken(other, "m1") {
		t.Fatal("deleting a conversation did not free its names alone")
	}
}
