package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/client"
)

// runnerFrame sends one runner frame and waits for its answer.
func runnerFrame(ctx context.Context, c *websocket.Conn, frame string) (map[string]any, error) {
	if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		return nil, err
	}
	_, data, err := c.Read(ctx)
	if err != nil {
		return nil, err
	}
	var reply map[string]any
	return reply, json.Unmarshal(data, &reply)
}

func dialRunner(t *testing.T, ctx context.Context, url, conv string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(url, "http") + "/v1/conversations/" + conv + "/runner?agentId=bot"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startStreaming starts a server on a new file, creates a conversation and
// has a runner start message r1 in it.
func startStreaming(t *testing.T, ctx context.Context) (db string, srv *server, id string, c *websocket.Conn) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "parley.db")
	srv = startServer(t, db)
	v, err := client.New(srv.url, "").CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id = v.Conversation.ID
	c = dialRunner(t, ctx, srv.url, id)
	if r, err := runnerFrame(ctx, c, `{"type":"message.create","turnId":"r1"}`); err != nil || r["type"] != "ack" {
		t.Fatalf("create: %v %v", r, err)
	}
	return db, srv, id, c
}

// TestRunnerSurvivesAServerCrash kills the server with SIGKILL while a runner
// streams deltas; after a restart the message holds every delta that was
// acknowledged, in order, and the runner reconnects and finishes it.
func TestRunnerSurvivesAServerCrash(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, srv, id, c := startStreaming(t, ctx)
	delta := func(i int) string { return fmt.Sprintf("d%04d ", i) }
	acked := 0
	go func() { time.Sleep(400 * time.Millisecond); srv.kill() }()
	for i := 0; ; i++ {
		r, err := runnerFrame(ctx, c, fmt.Sprintf(`{"type":"message.part.text-delta","turnId":"r1","delta":%q}`, delta(i)))
		if err != nil {
			break // the server died
		}
		if r["type"] != "ack" {
			t.Fatalf("delta %d: %v", i, r)
		}
		acked++
	}
	c.CloseNow()
	if acked < 10 {
		t.Fatalf("only %d deltas acknowledged before the kill", acked)
	}

	srv2 := startServer(t, db)
	if _, err := client.New(srv2.url, "").Message(ctx, id, "r1"); err != nil {
		t.Fatalf("the streaming message is gone after the crash: %v", err)
	}
	var want strings.Builder
	for i := 0; i < acked; i++ {
		want.WriteString(delta(i))
	}
	// The row alone may lag (checkpoints); the full text comes after finalize.
	c2 := dialRunner(t, ctx, srv2.url, id)
	defer c2.CloseNow()
	if r, err := runnerFrame(ctx, c2, `{"type":"message.part.text-delta","turnId":"r1","delta":"END"}`); err != nil || r["type"] != "ack" {
		t.Fatalf("delta after restart: %v %v", r, err)
	}
	if r, err := runnerFrame(ctx, c2, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`); err != nil || r["type"] != "ack" {
		t.Fatalf("finalize after restart: %v %v", r, err)
	}
	m, err := client.New(srv2.url, "").Message(ctx, id, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Content, want.String()) || !strings.HasSuffix(m.Content, "END") {
		t.Fatalf("after restart the message has %d bytes; the %d acknowledged deltas are %d bytes (prefix kept: %v)",
			len(m.Content), acked, want.Len(), strings.HasPrefix(m.Content, want.String()))
	}
	// Only whole deltas, in order: anything between the acknowledged ones and
	// END is deltas that were durable but whose ack was lost with the server.
	rest := strings.TrimSuffix(strings.TrimPrefix(m.Content, want.String()), "END")
	for i := acked; rest != ""; i++ {
		if !strings.HasPrefix(rest, delta(i)) {
			t.Fatalf("unexpected text after the acknowledged deltas: %q", rest)
		}
		rest = rest[len(delta(i)):]
	}
}

// TestRunnerThatStaysAwayEndsCanceled: after a crash, a streaming message
// whose runner never comes back is finalized canceled once the grace period
// passes, and the conversation goes on.
func TestRunnerThatStaysAwayEndsCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, srv, id, c := startStreaming(t, ctx)
	if r, err := runnerFrame(ctx, c, `{"type":"message.part.text-delta","turnId":"r1","delta":"cut short"}`); err != nil || r["type"] != "ack" {
		t.Fatalf("delta: %v %v", r, err)
	}
	srv.kill()
	c.CloseNow()

	srv2 := startServer(t, db, "-runner-grace", "200ms")
	cl := client.New(srv2.url, "")
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := cl.Message(ctx, id, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if m.Status == "canceled" {
			if m.Content != "cut short" {
				t.Fatalf("canceled message lost its text: %q", m.Content)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned message is still %s", m.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cl.PostMessage(ctx, id, client.Message{AgentID: "someone", Content: "the floor is free again"}); err != nil {
		t.Fatalf("after the orphan ended, the conversation is stuck: %v", err)
	}
}
