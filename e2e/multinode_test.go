package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/postgres/pgtest"
)

// twoNodes runs two parley serve processes on one PostgreSQL schema.
func twoNodes(t *testing.T) (a, b *client.Client) {
	t.Helper()
	url := pgtest.Schema(t)
	unused := filepath.Join(t.TempDir(), "unused.db")
	na := startServer(t, unused, "-postgres", url)
	nb := startServer(t, unused, "-postgres", url)
	return client.New(na.url, ""), client.New(nb.url, "")
}

// TestWritesOnOneNodeReachSubscribersOnAnother: a subscriber on node B
// gets, in order, every message written through node A.
func TestWritesOnOneNodeReachSubscribersOnAnother(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := a.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	st := b.Subscribe(ctx, id, client.SubscribeOptions{})
	defer st.Close()
	if f, err := st.Next(ctx); err != nil || f.Init == nil {
		t.Fatalf("no init from node B: %v", err)
	}
	const n = 50
	for i := range n {
		if _, err := a.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "hello"}); err != nil {
			t.Fatalf("message %d on node A: %v", i, err)
		}
	}
	seq, messages := int64(1), 0
	for messages < n {
		f, err := st.Next(ctx)
		if err != nil {
			t.Fatalf("node B's subscriber, after %d of %d messages: %v", messages, n, err)
		}
		if f.Event == nil {
			continue
		}
		if f.Event.Seq != seq+1 {
			t.Fatalf("node B's subscriber got seq %d after %d", f.Event.Seq, seq)
		}
		seq = f.Event.Seq
		if f.Event.Type == parley.EventMessage {
			messages++
		}
	}
}

// TestClaimRacesAcrossNodesHaveOneWinner: round after round, two agents
// claim the next turn at once, one through each node: exactly one wins,
// whichever node decided on a cached state (a refusal is as fresh as an
// acceptance). The winner then ends its turn through its node.
func TestClaimRacesAcrossNodesHaveOneWinner(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := a.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice", "bob"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	nodes := map[string]*client.Client{"alice": a, "bob": b}
	for round := range 100 {
		var mu sync.Mutex
		var winners []string
		var errs []error
		var wg sync.WaitGroup
		for agent, node := range nodes {
			wg.Go(func() {
				_, err := node.Claim(ctx, id, agent, 0)
				mu.Lock()
				defer mu.Unlock()
				switch code := parley.ErrorCode(err); {
				case err == nil:
					winners = append(winners, agent)
				case !strings.HasSuffix(code, "conflict"): // claim_conflict, turn_conflict: the other won
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 || len(winners) != 1 {
			t.Fatalf("round %d: winners %v, errors %v", round, winners, errs)
		}
		w := winners[0]
		if _, err := nodes[w].PostMessage(ctx, id, client.Message{AgentID: w, Content: "mine", Finality: parley.FinalityTurn}); err != nil {
			t.Fatalf("round %d: %s ends its turn: %v", round, w, err)
		}
	}
}
