package storetest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testConversationChange rewrites a conversation's record and the agents
// it is listed for with an append (AppendParams.Conversation): both
// change with the events, or neither does (a lost race, a NUL).
func testConversationChange(t *testing.T, s store.Store) {
	p := func(name string) string { return name + "-" + uuid.NewString()[:8] }
	a, b, gone, kept, added := p("a"), p("b"), p("gone"), p("kept"), p("added")
	id := uuid.NewString()
	c := parley.Conversation{ID: id, Epoch: "ep", Title: "before", Participants: []string{a, b}, Members: []string{gone, kept}, TurnPolicy: parley.PolicyRoundRobin,
		MessageFormat: "v2", Metadata: json.RawMessage(`{"k":1}`), CreatedBy: a, CreatedAt: t0}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: []string{a, b, gone, kept}, Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	lists := func(agent string) bool {
		t.Helper()
		recs, _, err := s.ListConversations(ctx(t), store.ListConversationsParams{Member: agent, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(recs, func(r *store.ConversationRecord) bool { return r.Conversation.ID == id })
	}
	changed := c
	changed.Title, changed.Metadata, changed.Participants, changed.Members = "after", nil, []string{a, added}, []string{kept}
	change := &store.ConversationChange{Conversation: changed, Members: []string{a, added, kept}}
	up := event(id, 2, a)
	up.Type, up.Turn, up.TurnID, up.Data = parley.EventConversationUpdated, 0, "", json.RawMessage(`{"title":"after"}`)

	// A lost race changes nothing; nor does a record holding a NUL.
	wantCode(t, s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 5, Events: []parley.Event{{ConversationID: id, Seq: 6, Type: up.Type, Finality: up.Finality, Time: t0, Data: up.Data}}, Conversation: change}), parley.ECONFLICT)
	bad := *change
	bad.Conversation.Title = "a\x00b"
	wantCode(t, s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{up}, Conversation: &bad}), parley.EINVALIDVALUE)
	if rec, err := s.GetConversation(ctx(t), id); err != nil || rec.Conversation.Title != "before" || rec.LastSeq != 1 || !lists(gone) || lists(added) {
		t.Fatalf("a refused change wrote: %+v %v", rec, err)
	}

	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Epoch: "ep", Events: []parley.Event{up}, State: []byte(`{}`), Conversation: change}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetConversation(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.Conversation
	if got.Title != "after" || got.Metadata != nil || !slices.Equal(got.Participants, []string{a, added}) || !slices.Equal(got.Members, []string{kept}) ||
		got.Epoch != "ep" || got.CreatedBy != a || !got.CreatedAt.Equal(t0.Time) || rec.LastSeq != 2 {
		t.Fatalf("the changed record: %+v (lastSeq %d)", got, rec.LastSeq)
	}
	for agent, want := range map[string]bool{a: true, added: true, kept: true, b: false, gone: false} {
		if lists(agent) != want {
			t.Errorf("listed for %s: %v, want %v", agent, !want, want)
		}
	}
	// Listed by its title as it is now.
	recs, _, err := s.ListConversations(ctx(t), store.ListConversationsParams{Member: added, Title: "aft", Limit: 10})
	if err != nil || len(recs) != 1 || recs[0].Conversation.Title != "after" {
		t.Fatalf("by the new title: %v %v", recs, err)
	}
}
