package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestUnreadStreamsOfTheBinary: parley serve counts what it holds for
// streams that their clients do not read (parley_subscriber_bytes on
// /metrics) and keeps it within -subscriber-memory, while streams over SSE
// and WebSocket read nothing of a conversation of large messages and a
// follower reads everything, which it gets, in order, with no reconnect.
// A -subscriber-memory too small for a snapshot is refused at start.
func TestUnreadStreamsOfTheBinary(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "parley.db")
	refusesToStart(t, ctx, db, "127.0.0.1:0", "-subscriber-memory 1048576: at least", "-subscriber-memory", "1048576")
	const budget = 16 << 20
	srv := startServer(t, db, "-subscriber-memory", "16777216")
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "large", TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	type got struct {
		seq int64
		err error
	}
	seqs := make(chan got, 1000)
	var reconnects atomic.Int64
	go func() {
		st := c.Subscribe(ctx, id, client.SubscribeOptions{OnReconnect: func(error) { reconnects.Add(1) }})
		defer st.Close()
		for {
			f, err := st.Next(ctx)
			switch {
			case err != nil:
				seqs <- got{err: err}
				return
			case f.Event != nil:
				seqs <- got{seq: f.Event.Seq}
			case f.Init != nil && !f.Init.Recovered:
				seqs <- got{seq: f.Init.Position.Seq}
			}
		}
	}()
	start := <-seqs // the follower's snapshot
	if start.err != nil {
		t.Fatal(start.err)
	}
	for i := range 8 {
		conn, err := dialUnread(srv.url, id, i%2 == 1)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	text := strings.Repeat("0123456789", 50_000)
	var held float64
	next := start.seq + 1
	for range 40 {
		m, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: text})
		if err != nil {
			t.Fatal(err)
		}
		for next <= m.Seq {
			g := <-seqs
			if g.err != nil || g.seq != next {
				t.Fatalf("the follower got seq %d (%v), want %d", g.seq, g.err, next)
			}
			next++
		}
		h, ok := metric(srv.url, "parley_subscriber_bytes")
		if !ok {
			t.Fatal("/metrics has no parley_subscriber_bytes")
		}
		if h > budget {
			t.Fatalf("after seq %d the server holds %v bytes for its subscribers, over -subscriber-memory %d", m.Seq, h, budget)
		}
		held = max(held, h)
	}
	if held == 0 {
		t.Fatal("8 streams that read nothing of 20 MB were never counted as holding anything")
	}
	if _, ok := metric(srv.url, "parley_subscribers_shed_total"); !ok {
		t.Fatal("/metrics has no parley_subscribers_shed_total")
	}
	if n := reconnects.Load(); n != 0 {
		t.Fatalf("the follower reconnected %d times", n)
	}
}
