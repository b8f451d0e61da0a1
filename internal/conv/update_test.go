package conv_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestUpdateConversation decides a change of a conversation: its owner or
// an admin only, a JSON merge patch of the metadata, names added and
// removed, nothing written when nothing changes, the guidance following
// the new participants; and a replay of the log folds it as the live
// state did, refusing an update a live change could not have written.
func TestUpdateConversation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env := conv.Env{Now: now}
	s, _, err := conv.Create(parley.Conversation{ID: "c1", Epoch: "e1", Participants: []string{"a", "b"}, Members: []string{"m"}, CreatedBy: "a",
		Metadata: json.RawMessage(`{"k":1,"o":{"x":1,"y":2}}`)}, env)
	if err != nil {
		t.Fatal(err)
	}
	start := s
	title := "new"
	patch := parley.ConversationPatch{Title: &title, Metadata: json.RawMessage(`{"k":null,"o":{"y":null,"z":3},"list":[1]}`),
		Participants: &parley.NameChanges{Add: []string{"c", "a"}, Remove: []string{"b", "nobody"}}, Members: &parley.NameChanges{Remove: []string{"m"}}}
	for _, who := range []conv.Actor{{AgentID: "b"}, {AgentID: "m"}, {AgentID: "outsider"}} {
		if err := conv.Authorize(s, conv.UpdateConversation{Actor: who, Patch: patch}); parley.ErrorCode(err) != parley.EFORBIDDEN {
			t.Fatalf("%s may change the conversation: %v", who.AgentID, err)
		}
	}
	for _, who := range []conv.Actor{{AgentID: "a"}, {Admin: true}} {
		if err := conv.Authorize(s, conv.UpdateConversation{Actor: who, Patch: patch}); err != nil {
			t.Fatalf("%+v may not: %v", who, err)
		}
	}
	d, err := conv.Decide(s, conv.UpdateConversation{Actor: conv.Actor{AgentID: "a"}, Patch: patch}, env)
	if err != nil || len(d.Events) != 1 || d.Events[0].Type != parley.EventConversationUpdated || d.Events[0].Turn != 0 || d.Events[0].AgentID != "a" {
		t.Fatalf("decision: %+v, %v", d, err)
	}
	s = conv.Evolve(s, d.Events...)
	c := s.Conversation
	if c.Title != "new" || string(c.Metadata) != `{"list":[1],"o":{"x":1,"z":3}}` || !slices.Equal(c.Participants, []string{"a", "c"}) || c.Members != nil || c.ID != "c1" || c.CreatedBy != "a" {
		t.Fatalf("after the update: %+v (metadata %s)", c, c.Metadata)
	}
	if g := s.GuidanceFor(now, nil); g.NextAgentID != "a" {
		t.Fatalf("round-robin names %q", g.NextAgentID)
	}
	if !s.IsMember("c") || s.IsMember("b") || s.IsMember("m") || !s.IsMember("a") {
		t.Fatal("who takes part did not follow the update")
	}
	// Numbers stay as they were written, those the patch leaves and those it
	// sets: a large integer is not rounded, an exponent is kept.
	exact, err := conv.Decide(s, conv.UpdateConversation{Actor: conv.Actor{AgentID: "a"}, Patch: parley.ConversationPatch{Metadata: json.RawMessage(`{"big":12345678901234567890,"e":1.5e300}`)}}, env)
	if err != nil || len(exact.Events) != 1 {
		t.Fatalf("a patch of numbers: %+v, %v", exact, err)
	}
	s2 := conv.Evolve(s, exact.Events...)
	next, err := conv.Decide(s2, conv.UpdateConversation{Actor: conv.Actor{AgentID: "a"}, Patch: parley.ConversationPatch{Metadata: json.RawMessage(`{"list":null}`)}}, env)
	if err != nil || len(next.Events) != 1 {
		t.Fatalf("a patch after it: %+v, %v", next, err)
	}
	if got := string(conv.Evolve(s2, next.Events...).Conversation.Metadata); got != `{"big":12345678901234567890,"e":1.5e300,"o":{"x":1,"z":3}}` {
		t.Fatalf("metadata after two patches: %s", got)
	}
	// The same patch again changes nothing: no event.
	if d, err := conv.Decide(s, conv.UpdateConversation{Actor: conv.Actor{AgentID: "a"}, Patch: patch}, env); err != nil || len(d.Events) != 0 {
		t.Fatalf("the same patch again: %+v, %v", d, err)
	}
	// The rules a new conversation is held to.
	long := longString(513)
	for name, p := range map[string]parley.ConversationPatch{
		"empty":          {},
		"long title":     {Title: &long},
		"bad name":       {Participants: &parley.NameChanges{Add: []string{"a b"}}},
		"both":           {Members: &parley.NameChanges{Add: []string{"c"}}},
		"not JSON":       {Metadata: json.RawMessage(`{`)},
		"bad remove":     {Members: &parley.NameChanges{Remove: []string{""}}},
		"metadata large": {Metadata: json.RawMessage(`{"big":"` + longString(17<<10) + `"}`)},
	} {
		if _, err := conv.Decide(s, conv.UpdateConversation{Actor: conv.Actor{Admin: true}, Patch: p}, env); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// A replay folds the update as the live state did.
	r := conv.NewReplay(start, conv.ReplayEnv{Env: conv.Env{Now: now.Add(time.Hour)}})
	e := d.Events[0]
	if err := r.Add(&e); err != nil {
		t.Fatal(err)
	}
	if got := r.State().Conversation; got.Title != c.Title || string(got.Metadata) != string(c.Metadata) || !slices.Equal(got.Participants, c.Participants) {
		t.Fatalf("replayed: %+v", got)
	}
	bad := d.Events[0]
	bad.Data = json.RawMessage(`{"title":"x","metadata":null,"participants":["a","a"],"members":[],"updatedBy":"a"}`)
	if err := conv.NewReplay(start, conv.ReplayEnv{Env: conv.Env{Now: now.Add(time.Hour)}}).Add(&bad); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("a replayed update listing a participant twice: %v", err)
	}
}

func longString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
