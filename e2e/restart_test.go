package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestKillDuringWritesLosesNoAcknowledgedWrite kills the server with SIGKILL
// while writers are busy, restarts it on the same file, and checks that every
// write that was answered 2xx is there and that seq stays dense.
func TestKillDuringWritesLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	srv := startServer(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New(srv.url, "")

	const convs = 4
	ids := make([]string, convs)
	for i := range ids {
		v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}, TurnPolicy: parley.PolicyFree})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = v.Conversation.ID
	}

	type ack struct {
		conv string
		id   string
		seq  int64
	}
	var mu sync.Mutex
	var acked []ack
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := 0; w < convs*2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			conv, agent := ids[w%convs], fmt.Sprintf("agent-%d", w)
			for i := 0; wctx.Err() == nil; i++ {
				res, err := c.PostMessage(wctx, conv, client.Message{AgentID: agent, Content: fmt.Sprintf("%s says %d", agent, i), Finality: parley.FinalityTurn})
				if err != nil {
					continue // conflicts with the other writer, or the server died
				}
				mu.Lock()
				acked = append(acked, ack{conv, res.Message.ID, res.Seq})
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	srv.kill()
	stopWriters()
	wg.Wait()
	if len(acked) < 20 {
		t.Fatalf("only %d writes were acknowledged before the kill; the test needs more", len(acked))
	}

	srv2 := startServer(t, db)
	c2 := client.New(srv2.url, "")
	for _, a := range acked {
		m, err := c2.Message(ctx, a.conv, a.id)
		if err != nil {
			t.Fatalf("acknowledged message %s (seq %d) is gone after restart: %v", a.id, a.seq, err)
		}
		if m.Seq != a.seq {
			t.Fatalf("message %s has seq %d after restart, was acknowledged at %d", a.id, m.Seq, a.seq)
		}
	}
	for _, id := range ids {
		all, head := readLog(t, ctx, c2, id)
		if head != int64(len(all)) {
			t.Fatalf("conversation %s: %d events but head.lastSeq %d", id, len(all), head)
		}
		// The restarted server accepts writes that continue the log.
		res, err := c2.PostMessage(ctx, id, client.Message{AgentID: "after-restart", Content: "still here"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Seq != head+1 {
			t.Fatalf("first write after restart got seq %d, want %d", res.Seq, head+1)
		}
	}
	if strings.Contains(srv2.log(), "level=ERROR") {
		t.Fatalf("restarted server logged errors:\n%s", srv2.log())
	}
}
