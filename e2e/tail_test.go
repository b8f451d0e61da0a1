package e2e

import (
	"bufio"
	"context"
	"net"
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
	url, ctx, c, id := tailed(t, client.NewConversation{Title: "tailed", Participants: []string{"alice", "bob"}})
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "hello from before", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}

	expect := startTail(t, ctx, "-server", url, "-after", "0", id)
	expect("==", "tailed", "resumed at seq 0")
	expect("-> bob: start_turn turn 2") // the guidance as of subscribing
	expect("#2 t1 [alice] message (closes turn)", "hello from before")
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "bob", Content: "live now"}); err != nil {
		t.Fatal(err)
	}
	expect("#3 t2 [bob] message", "live now")
	expect("bob", "continue_turn turn 2")
}

// TestTailJoinsMidStream runs "parley tail" while a message streams: its
// snapshot shows every word streamed so far, and the words after it follow.
func TestTailJoinsMidStream(t *testing.T) {
	t.Parallel()
	url, ctx, c, id := tailed(t, client.NewConversation{Title: "mid-stream"})
	run := answering(t, ctx, c, id, "r1")
	for _, w := range []string{"The ", "answer ", "is "} {
		if _, err := run.Text(ctx, "r1", w); err != nil {
			t.Fatal(err)
		}
	}
	expect := startTail(t, ctx, "-server", url, id)
	expect("(snapshot at seq 5")
	expect("[assistant] assistant: The answer is (streaming)")
	if _, err := run.Text(ctx, "r1", "42."); err != nil {
		t.Fatal(err)
	}
	expect("r1 += 42.")
}

// TestTailShowsALargeMessageSummarized runs "parley tail" on a
// conversation with a large message: its snapshot names the message as
// summarized, with its size, and a tool call that follows is printed as
// one line with what changed.
func TestTailShowsALargeMessageSummarized(t *testing.T) {
	t.Parallel()
	url, ctx, c, id := tailed(t, client.NewConversation{Title: "large", TurnPolicy: parley.PolicyFree})
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: strings.Repeat("long ", 60_000), Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	run := answering(t, ctx, c, id, "r1")
	expect := startTail(t, ctx, "-server", url, id)
	expect("(snapshot at seq 3")
	expect("#2 t1 [alice] assistant: (58", " KiB, summarized; GET …/messages/") // 300 KB of text, twice
	if _, err := run.Tool(ctx, "r1", client.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolRunning, Args: []byte(`{"q":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	expect(`part.updated r1 tool c1 search running args {"q":"x"}`)
}

// tailed starts a server with a new conversation for a tail test, and
// returns the server's URL, a context for the test, a client and the
// conversation's id.
func tailed(t *testing.T, nc client.NewConversation) (url string, ctx context.Context, c *client.Client, id string) {
	t.Helper()
	srv := startServer(t, filepath.Join(t.TempDir(), "parley.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c = client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	return srv.url, ctx, c, v.Conversation.ID
}

// answering connects the runner of agent "assistant" and starts its
// message mid; the runner closes when the test ends.
func answering(t *testing.T, ctx context.Context, c *client.Client, id, mid string) *client.Runner {
	t.Helper()
	run, err := c.ConnectRunner(ctx, id, "assistant")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	if _, err := run.Create(ctx, mid); err != nil {
		t.Fatal(err)
	}
	return run
}

// startTail runs "parley tail" with args until the test ends, and returns
// a function that reads its output up to a line that contains every want.
func startTail(t *testing.T, ctx context.Context, args ...string) (expect func(want ...string)) {
	t.Helper()
	tail := exec.CommandContext(ctx, binary, append([]string{"tail"}, args...)...)
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tail.Process.Kill(); tail.Wait() })
	lines := bufio.NewScanner(out)
	return func(want ...string) {
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
}

// TestTailSaysItCannotReachTheServer: "parley tail" against a server it
// never reached exits non-zero saying so, rather than "resuming" for
// ever; one that reached its server and lost it resumes once the server
// is back.
func TestTailSaysItCannotReachTheServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	cmd := exec.CommandContext(ctx, binary, "tail", "-server", nobody, "some-conversation")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tail of a server nobody runs did not exit; it said:\n%s", stderr.String())
	}
	if err == nil || !strings.Contains(stderr.String(), "cannot reach the server at "+nobody) || strings.Contains(stderr.String(), "resuming") {
		t.Fatalf("tail of a server nobody runs: %v, said:\n%s", err, stderr.String())
	}

	// Reached, then lost: it resumes.
	db := filepath.Join(t.TempDir(), "parley.db")
	srv := startServer(t, db)
	addr := strings.TrimPrefix(srv.url, "http://")
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "lost and found", Participants: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	tail := exec.CommandContext(ctx, binary, "tail", "-server", srv.url, id)
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var tailErr strings.Builder
	tail.Stderr = &tailErr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tail.Process.Kill(); tail.Wait() })
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("tail ended without a line containing %q; it said:\n%s", want, tailErr.String())
	}
	expect("lost and found")
	srv.stop()
	srv = startServerAt(t, db, addr)
	if _, err := client.New(srv.url, "").PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "back again"}); err != nil {
		t.Fatal(err)
	}
	expect("back again")
}
