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
	for round := range 1000 {
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

// TestTokensOnPostgres: `parley migrate` and `parley token` work on a
// PostgreSQL database as on a SQLite file. A token made with the command
// line is required at once by every node; revoked with it, it is refused
// by every node within seconds, and the stream it held is ended.
func TestTokensOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	if out := runParley(t, "migrate", "-postgres", url); !strings.Contains(out, "postgres: schema version 0 -> ") {
		t.Fatalf("migrate: %q", out)
	}
	unused := filepath.Join(t.TempDir(), "unused.db")
	na := startServer(t, unused, "-postgres", url)
	nb := startServer(t, unused, "-postgres", url)
	secret := runParley(t, "token", "create", "-postgres", url, "-kind", "admin", "-name", "ops")
	list := runParley(t, "token", "list", "-postgres", url)
	if !strings.Contains(list, "admin") || !strings.Contains(list, "ops") || strings.Contains(list, secret) {
		t.Fatalf("token list: %q", list)
	}
	tokenID := strings.Fields(strings.Split(list, "\n")[1])[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var id string
	// Open mode ends on every node within seconds of the token's making.
	for _, n := range []*server{na, nb} {
		within(t, 10*time.Second, "node "+n.url+" still runs open", func() bool {
			_, err := client.New(n.url, "").Conversation(ctx, "any")
			return parley.ErrorCode(err) == parley.EUNAUTHORIZED
		})
		v, err := client.New(n.url, secret).CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}})
		if err != nil {
			t.Fatalf("with the token: %v", err)
		}
		id = v.Conversation.ID
	}
	st := client.New(nb.url, secret).Subscribe(ctx, id, client.SubscribeOptions{})
	defer st.Close()
	if f, err := st.Next(ctx); err != nil || f.Init == nil {
		t.Fatalf("no init: %v", err)
	}
	runParley(t, "token", "revoke", "-postgres", url, tokenID)
	for _, n := range []*server{na, nb} {
		within(t, 10*time.Second, "node "+n.url+" still takes the revoked token", func() bool {
			_, err := client.New(n.url, secret).Conversation(ctx, id)
			return parley.ErrorCode(err) == parley.EUNAUTHORIZED
		})
	}
	for {
		if _, err := st.Next(ctx); err != nil {
			if parley.ErrorCode(err) != parley.EUNAUTHORIZED {
				t.Fatalf("the revoked token's stream ended with %v, want unauthorized", err)
			}
			break
		}
	}
}

// within polls ok until it holds, and fails the test with what if it does
// not hold within d.
func within(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s after %s", what, d)
		}
	}
}
