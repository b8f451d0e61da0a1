package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// TestServeOnPostgres runs the binary on PostgreSQL, kills it with SIGKILL
// after a few writes and finds them all after a restart.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	unused := filepath.Join(t.TempDir(), "unused.db")
	srv := startServer(t, unused, "-postgres", url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, agent := range []string{"a", "b", "a", "b"} {
		r, err := c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: agent, Content: "hi", Finality: parley.FinalityTurn})
		if err != nil || r.Turn != i+1 {
			t.Fatalf("message %d: turn %v, %v", i, r, err)
		}
		ids = append(ids, r.Message.ID)
	}
	srv.kill()
	srv2 := startServer(t, unused, "-postgres", url)
	c2 := client.New(srv2.url, "")
	for _, id := range ids {
		if _, err := c2.Message(ctx, v.Conversation.ID, id); err != nil {
			t.Fatalf("message %s after restart: %v", id, err)
		}
	}
	view, err := c2.Conversation(ctx, v.Conversation.ID)
	if err != nil || view.Head.LastSeq != 5 || view.Guidance.NextAgentID != "a" || view.Guidance.Turn != 5 {
		t.Fatalf("after restart: %+v, %v", view, err)
	}
}
