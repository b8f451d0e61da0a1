package client_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestFoldConversationUpdated folds the conversation's record: the
// init's, then each conversation.updated applied to it.
func TestFoldConversationUpdated(t *testing.T) {
	t.Parallel()
	var f client.Fold
	if _, ok := f.Conversation(); ok {
		t.Fatal("an empty fold holds a conversation")
	}
	made := parley.Conversation{ID: "c1", Title: "old", Participants: []string{"a", "b"}, Members: []string{"m"}, TurnPolicy: parley.PolicyRoundRobin, MessageFormat: "v2", Metadata: json.RawMessage(`{"k":1}`), CreatedBy: "a"}
	if err := f.Apply(client.Frame{Type: "init", Init: &client.Init{Conversation: made}}); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(parley.ConversationUpdate{Title: "new", Participants: []string{"a", "c"}, Members: []string{}, UpdatedBy: "a"})
	if err := f.ApplyEvent(parley.Event{ConversationID: "c1", Seq: 5, Type: parley.EventConversationUpdated, Finality: parley.FinalityNone, Data: data}); err != nil {
		t.Fatal(err)
	}
	c, ok := f.Conversation()
	if !ok || c.Title != "new" || !slices.Equal(c.Participants, []string{"a", "c"}) || c.Members != nil || c.Metadata != nil ||
		c.ID != "c1" || c.CreatedBy != "a" || c.TurnPolicy != parley.PolicyRoundRobin {
		t.Fatalf("folded: %+v", c)
	}
	c.Participants[0] = "changed" // a copy
	if again, _ := f.Conversation(); again.Participants[0] != "a" {
		t.Fatal("Conversation returned the fold's own slice")
	}
	if err := f.ApplyEvent(parley.Event{Seq: 6, Type: parley.EventConversationUpdated, Data: json.RawMessage(`{"title":5}`)}); err == nil {
		t.Fatal("an update whose data is not one folded")
	}
}

// TestUpdateConversation changes a conversation over HTTP and follows
// the change on a stream: the view the call returns and the record the
// accumulator folds agree.
func TestUpdateConversation(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "old", Participants: []string{"a", "b"}, Metadata: json.RawMessage(`{"k":1,"drop":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}}) // the whole log: the update is in it, whenever it connects
	defer st.Close()
	acc := client.NewAccumulator(c, id)
	title := "new"
	got, err := c.UpdateConversation(ctx, id, parley.ConversationPatch{Title: &title, Metadata: json.RawMessage(`{"drop":null,"more":2}`),
		Participants: &parley.NameChanges{Add: []string{"c"}, Remove: []string{"a"}}, Members: &parley.NameChanges{Add: []string{"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := got.Conversation
	if want.Title != "new" || string(want.Metadata) != `{"k":1,"more":2}` || !slices.Equal(want.Participants, []string{"b", "c"}) || !slices.Equal(want.Members, []string{"m"}) {
		t.Fatalf("the view after the update: %+v", want)
	}
	for u, err := range acc.Updates(ctx, st) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.Data.(*client.ConversationUpdated); ok {
			break
		}
	}
	folded, ok := acc.Conversation()
	if !ok || folded.Title != want.Title || string(folded.Metadata) != string(want.Metadata) || !slices.Equal(folded.Participants, want.Participants) || !slices.Equal(folded.Members, want.Members) {
		t.Fatalf("folded %+v, the server says %+v", folded, want)
	}
	if _, err := c.UpdateConversation(ctx, id, parley.ConversationPatch{}); parley.ErrorCode(err) != parley.EINVALID {
		t.Fatalf("an empty patch: %v", err)
	}
}
