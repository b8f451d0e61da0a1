package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// TestSearch runs the binary on each store and searches it with the Go
// client's tokens: an agent finds what its conversations hold and nothing
// else; a response a runner streams is found once finalized; the index
// outlives a kill -9; a deleted conversation's messages are found no more.
func TestSearch(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		searchOn(t, filepath.Join(t.TempDir(), "parley.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Schema(t)
		searchOn(t, filepath.Join(t.TempDir(), "unused.db"), "-postgres", url)
	})
}

func searchOn(t *testing.T, db string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startServer(t, db, args...)
	open := client.New(srv.url, "")
	mk := func(c *client.Client, kind parley.TokenKind, agent string) string {
		tok, err := c.CreateToken(ctx, client.NewToken{Kind: kind, AgentID: agent})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Secret
	}
	adminToken := mk(open, parley.TokenAdmin, "")
	admin := client.New(srv.url, adminToken)
	aliceToken, carolToken, viewerToken := mk(admin, parley.TokenAgent, "alice"), mk(admin, parley.TokenAgent, "carol"), mk(admin, parley.TokenViewer, "")
	conv := func(participant string) string {
		v, err := admin.CreateConversation(ctx, client.NewConversation{Participants: []string{participant}, TurnPolicy: parley.PolicyFree})
		if err != nil {
			t.Fatal(err)
		}
		return v.Conversation.ID
	}
	ours, theirs := conv("alice"), conv("carol")
	for _, m := range []struct{ conv, agent, id, text string }{
		{ours, "alice", "a1", "the lighthouse keeper's log"},
		{ours, "alice", "a2", "a storm passed the lighthouse"},
		{theirs, "carol", "c1", "carol's lighthouse, private"},
	} {
		if _, err := admin.PostMessage(ctx, m.conv, client.Message{ID: m.id, AgentID: m.agent, Content: m.text}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := client.New(srv.url, aliceToken).ConnectRunner(ctx, ours, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Create(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "r1", "streamed past the lighthouse "); err != nil {
		t.Fatal(err)
	}
	find := func(url, token, query, convID string) []string {
		t.Helper()
		var ids []string
		for h, err := range client.New(url, token).EachHit(ctx, client.SearchOptions{Query: query, ConversationID: convID, Limit: 2}) {
			if err != nil {
				t.Fatalf("searching %q: %v", query, err)
			}
			ids = append(ids, h.MessageID)
		}
		sort.Strings(ids)
		return ids
	}
	if got := find(srv.url, adminToken, "streamed", ""); len(got) != 0 {
		t.Fatalf("a response still streaming was found: %v", got)
	}
	if _, err := r.Text(ctx, "r1", "into the calm"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finalize(ctx, "r1", "end_turn", ""); err != nil {
		t.Fatal(err)
	}
	check := func(url string) {
		t.Helper()
		for token, want := range map[string][]string{
			adminToken: {"a1", "a2", "c1", "r1"}, viewerToken: {"a1", "a2", "c1", "r1"},
			aliceToken: {"a1", "a2", "r1"}, carolToken: {"c1"},
		} {
			if got := find(url, token, "LIGHTHOUSE", ""); !slices.Equal(got, want) {
				t.Fatalf("found %v, want %v", got, want)
			}
		}
		if got := find(url, aliceToken, `"the calm"`, ours); !slices.Equal(got, []string{"r1"}) {
			t.Fatalf("the streamed response's last words: %v", got)
		}
		_, err := client.New(url, aliceToken).Search(ctx, client.SearchOptions{Query: "lighthouse", ConversationID: theirs})
		if parley.ErrorCode(err) != parley.EFORBIDDEN {
			t.Fatalf("alice searching carol's conversation: %v", err)
		}
	}
	check(srv.url)
	srv.kill()
	srv = startServer(t, db, args...)
	check(srv.url)
	if err := client.New(srv.url, adminToken).DeleteConversation(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if got := find(srv.url, adminToken, "lighthouse", ""); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("after the delete: %v", got)
	}
}
