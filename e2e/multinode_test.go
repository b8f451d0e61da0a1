package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
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

// TestDeleteAcrossNodes: two nodes with tokens. A conversation of alice's
// is deleted through node A: node B ends alice's SSE and WebSocket
// streams and her runner there with not_found, and answers 404. Made
// again through A under the same id, of bob's, it is the new conversation
// on B too: bob's, its log from seq 1, alice refused with 403 (not
// written into it), and the log B serves is exactly what was written.
func TestDeleteAcrossNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	runParley(t, "migrate", "-postgres", url)
	token := func(kind, agent string) string {
		args := []string{"token", "create", "-postgres", url, "-kind", kind}
		if agent != "" {
			args = append(args, "-agent", agent)
		}
		return runParley(t, args...)
	}
	admin, alice, bob := token("admin", ""), token("agent", "alice"), token("agent", "bob")
	unused := filepath.Join(t.TempDir(), "unused.db")
	na, nb := startServer(t, unused, "-postgres", url), startServer(t, unused, "-postgres", url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminA, adminB := client.New(na.url, admin), client.New(nb.url, admin)
	aliceA, aliceB := client.New(na.url, alice), client.New(nb.url, alice)
	bobA, bobB := client.New(na.url, bob), client.New(nb.url, bob)

	v, err := adminA.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id, old := v.Conversation.ID, v.Conversation.Epoch
	var streams []*client.Stream
	for _, tr := range []client.Transport{client.SSE, client.WebSocket} {
		st := aliceB.Subscribe(ctx, id, client.SubscribeOptions{Transport: tr})
		defer st.Close()
		if f, err := st.Next(ctx); err != nil || f.Init == nil {
			t.Fatalf("no init from node B over %s: %v", tr, err)
		}
		streams = append(streams, st)
	}
	run, err := aliceB.ConnectRunner(ctx, id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := aliceA.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "old", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}

	// 1. Deleted through A: everything alice follows on B ends.
	if err := adminA.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	for i, st := range streams {
		for {
			_, err := st.Next(ctx)
			if err == nil {
				continue // what came before the delete
			}
			if parley.ErrorCode(err) != parley.ENOTFOUND {
				t.Fatalf("node B's stream %d ended with %v, want not_found", i, err)
			}
			break
		}
	}
	if _, err := run.Next(ctx); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("node B's runner ended with %v, want not_found", err)
	}
	if _, err := adminB.Conversation(ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("node B reads the deleted conversation: %v", err)
	}

	// 2. Made again through A, of bob's: B serves the new one.
	v, err = adminA.CreateConversation(ctx, client.NewConversation{ID: id, Participants: []string{"bob"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	if v.Conversation.Epoch == old {
		t.Fatalf("the conversation made again has the deleted one's epoch %s", old)
	}
	if _, err := bobA.PostMessage(ctx, id, client.Message{AgentID: "bob", Content: "new"}); err != nil {
		t.Fatal(err)
	}
	onB, err := adminB.Conversation(ctx, id)
	if err != nil || onB.Conversation.Epoch != v.Conversation.Epoch || !slices.Equal(onB.Conversation.Participants, []string{"bob"}) || onB.Head.LastSeq != 2 {
		t.Fatalf("node B shows %+v (%v); want bob's conversation of epoch %s at seq 2", onB, err, v.Conversation.Epoch)
	}
	if _, err := aliceB.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "ghost"}); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("alice posts through node B into bob's conversation: %v, want forbidden", err)
	}
	if _, err := bobB.PostMessage(ctx, id, client.Message{AgentID: "bob", Content: "through B", Finality: parley.FinalityTurn}); err != nil {
		t.Fatalf("bob posts through node B: %v", err)
	}
	fromA, headA := readLog(t, ctx, adminA, id)
	fromB, headB := readLog(t, ctx, adminB, id)
	var written []string
	for _, e := range fromA {
		written = append(written, e.Type+":"+e.AgentID)
	}
	if want := []string{parley.EventConversationCreated + ":admin", parley.EventMessage + ":bob", parley.EventMessage + ":bob"}; !slices.Equal(written, want) || headA != 3 {
		t.Fatalf("the log made again holds %q (head %d), want %q", written, headA, want)
	}
	if headB != headA || len(fromB) != len(fromA) {
		t.Fatalf("node B serves %d events (head %d), node A %d (head %d)", len(fromB), headB, len(fromA), headA)
	}
	for i := range fromA {
		if string(fromA[i].AppendJSON(nil)) != string(fromB[i].AppendJSON(nil)) {
			t.Fatalf("seq %d differs between the nodes:\n%s\n%s", i+1, fromA[i].AppendJSON(nil), fromB[i].AppendJSON(nil))
		}
	}
}
