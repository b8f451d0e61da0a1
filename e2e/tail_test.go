package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestTailFollowsAConversation runs "parley tail" against a live server and
// reads its lines as a person would.
func TestTailFollowsAConversation(t *testing.T) {
	t.Parallel()
	srv := startServer(t, filepath.Join(t.TempDir(), "parley.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "tailed", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "hello from before", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}

	tail := exec.CommandContext(ctx, binary, "tail", "-server", srv.url, "-after", "0", id)
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { tail.Process.Kill(); tail.Wait() }()
	lines := bufio.NewScanner(out)
	expect := func(want ...string) {
		t.Helper()
		for lines.Scan() {
			line := lines.Text()
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return
			}
		}
		t.Fatalf("tail ended without a line containing %q (err %v)", want, lines.Err())
	}
	expect("==", "tailed", "resumed at seq 0")
	expect("-> bob: start_turn turn 2") // the guidance as of subscribing
	expect("#2 t1 [alice] message (closes turn)", "hello from before")
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "bob", Content: "live now"}); err != nil {
		t.Fatal(err)
	}
	expect("#3 t2 [bob] message", "live now")
	expect("bob", "continue_turn turn 2")
}
