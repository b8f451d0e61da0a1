package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// startNodes starts n servers of the binary on one fresh PostgreSQL schema,
// each with args besides -postgres. Without PostgreSQL the test is skipped
// (pgtest.Schema says why).
func startNodes(t testing.TB, n int, args ...string) []*server {
	t.Helper()
	url := pgtest.Schema(t)
	unused := filepath.Join(t.TempDir(), "unused.db")
	args = append([]string{"-postgres", url}, args...)
	nodes := make([]*server, n)
	for i := range nodes {
		nodes[i] = startServer(t, unused, args...)
	}
	return nodes
}

// client is an SDK client of the server, without a token.
func (s *server) client() *client.Client { return client.New(s.url, "") }

// assistantAnswersThrough makes a conversation of the agent "assistant"
// and the member "human" through made, and attaches assistant's runner to
// it through runs. It returns the conversation's id and the runner.
func assistantAnswersThrough(ctx context.Context, t testing.TB, made, runs *client.Client) (string, *client.Runner) {
	t.Helper()
	v, err := made.CreateConversation(ctx, client.NewConversation{Participants: []string{"assistant"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := runs.ConnectRunner(ctx, v.Conversation.ID, "assistant")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	return v.Conversation.ID, run
}
