package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestSearchPagesAndIterates: Search returns the best hits first with a
// snippet that marks the words found, pages continue by cursor, EachHit
// walks every page, a search narrowed to a conversation finds its messages
// only, and an agent's search finds only what its agent may read.
func TestSearchPagesAndIterates(t *testing.T) {
	t.Parallel()
	sv, url, ctx := serve(t, engine.Options{}, api.Options{})
	token := func(kind parley.TokenKind, agent string) *client.Client {
		s, _, err := sv.tokens.CreateToken(ctx, kind, agent, "")
		if err != nil {
			t.Fatal(err)
		}
		return client.New(url, s)
	}
	admin, alice := token(parley.TokenAdmin, ""), token(parley.TokenAgent, "alice")
	ours, err := admin.CreateConversation(ctx, client.NewConversation{Title: "ours", Participants: []string{"alice"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := admin.CreateConversation(ctx, client.NewConversation{Title: "theirs", Participants: []string{"carol"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		text := "the harbour " + strings.Repeat("harbour ", i) + "at dawn"
		if _, err := admin.PostMessage(ctx, ours.Conversation.ID, client.Message{ID: fmt.Sprintf("h%d", i), AgentID: "alice", Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.PostMessage(ctx, theirs.Conversation.ID, client.Message{ID: "elsewhere", AgentID: "carol", Content: "another harbour"}); err != nil {
		t.Fatal(err)
	}

	p, err := admin.Search(ctx, client.SearchOptions{Query: "Harbour", ConversationID: ours.Conversation.ID, Limit: 2})
	if err != nil || len(p.Hits) != 2 || p.NextCursor == "" {
		t.Fatalf("the first page: %+v, %v", p, err)
	}
	h := p.Hits[0]
	if h.MessageID != "h4" || h.ConversationID != ours.Conversation.ID || h.ConversationTitle != "ours" || h.AgentID != "alice" ||
		h.Role != parley.RoleAssistant || h.Seq < 2 || h.CreatedAt.IsZero() || h.Rank <= p.Hits[1].Rank {
		t.Fatalf("the best hit: %+v", h)
	}
	if !slices.ContainsFunc(h.Snippet, func(s parley.SnippetPart) bool { return s.Match && s.Text == "harbour" }) {
		t.Fatalf("the snippet marks nothing: %+v", h.Snippet)
	}
	var all []string
	for h, err := range admin.EachHit(ctx, client.SearchOptions{Query: "harbour", ConversationID: ours.Conversation.ID, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, h.MessageID)
	}
	if !slices.Equal(all, []string{"h4", "h3", "h2", "h1", "h0"}) {
		t.Fatalf("EachHit gave %v", all)
	}
	var everywhere, alices []string
	for _, c := range []struct {
		c   *client.Client
		out *[]string
	}{{admin, &everywhere}, {alice, &alices}} {
		for h, err := range c.c.EachHit(ctx, client.SearchOptions{Query: "harbour"}) {
			if err != nil {
				t.Fatal(err)
			}
			*c.out = append(*c.out, h.MessageID)
		}
	}
	if len(everywhere) != 6 || len(alices) != 5 || slices.Contains(alices, "elsewhere") {
		t.Fatalf("the admin found %v, alice %v", everywhere, alices)
	}
	_, err = alice.Search(ctx, client.SearchOptions{Query: "harbour", ConversationID: theirs.Conversation.ID})
	if parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("alice searching carol's conversation: %v", err)
	}
	for _, err := range admin.EachHit(ctx, client.SearchOptions{Query: ""}) {
		if parley.ErrorCode(err) != parley.EINVALID {
			t.Fatalf("an empty search: %v, want invalid_request", err)
		}
	}
}
