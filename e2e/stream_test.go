package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// collect reads a stream until it has delivered the event with seq last,
// recording every event in order.
func collect(ctx context.Context, st *client.Stream, last int64, out chan<- []parley.Event, errc chan<- error) {
	var got []parley.Event
	for {
		f, err := st.Next(ctx)
		if err != nil {
			errc <- err
			return
		}
		if f.Event != nil {
			got = append(got, *f.Event)
			if f.Event.Seq >= last {
				out <- got
				return
			}
		}
	}
}

// TestAlternatingAgentsWithResumingSubscribers: two agents alternate turns
// over HTTP while a WebSocket and an SSE subscriber watch through a proxy that
// cuts them mid-stream twice; both resume from their last position and end
// with exactly the log: no gap, no duplicate.
func TestAlternatingAgentsWithResumingSubscribers(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	adminSecret := runParley(t, "token", "create", "-db", db, "-kind", "admin")
	aliceSecret := runParley(t, "token", "create", "-db", db, "-kind", "agent", "-agent", "alice")
	bobSecret := runParley(t, "token", "create", "-db", db, "-kind", "agent", "-agent", "bob")
	viewerSecret := runParley(t, "token", "create", "-db", db, "-kind", "viewer")
	srv := startServer(t, db)
	px := newProxy(t, strings.TrimPrefix(srv.url, "http://"))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := client.New(srv.url, adminSecret)
	view, err := admin.CreateConversation(ctx, client.NewConversation{Title: "e2e", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	id := view.Conversation.ID
	agents := map[string]*client.Client{"alice": client.New(srv.url, aliceSecret), "bob": client.New(srv.url, bobSecret)}

	const rounds = 30 // turns; each turn is 3 messages, the last closes it
	last := int64(1 + rounds*3)
	viewer := client.New(px.url(), viewerSecret)
	from := &parley.Position{Seq: 0}
	results := make(chan []parley.Event, 2)
	errc := make(chan error, 2)
	for _, tr := range []client.Transport{client.WebSocket, client.SSE} {
		st := viewer.Subscribe(ctx, id, client.SubscribeOptions{From: from, Transport: tr, MinBackoff: 10 * time.Millisecond})
		defer st.Close()
		go collect(ctx, st, last, results, errc)
	}

	var prevID string
	for turn := 1; turn <= rounds; turn++ {
		agent := "alice"
		if turn%2 == 0 {
			agent = "bob"
		}
		c := agents[agent]
		for i := 0; i < 3; i++ {
			m := client.Message{Role: parley.RoleAssistant, Content: fmt.Sprintf("turn %d part %d", turn, i), Precondition: &client.Precondition{ExpectTurn: turn, StartingTurn: i == 0}}
			if i == 0 && prevID != "" {
				m.ReplyTo = prevID
			}
			if i == 2 {
				m.Finality = parley.FinalityTurn
			}
			res, err := c.PostMessage(ctx, id, m)
			if err != nil {
				t.Fatalf("turn %d message %d by %s: %v", turn, i, agent, err)
			}
			if res.Turn != turn {
				t.Fatalf("message landed in turn %d, want %d", res.Turn, turn)
			}
			prevID = res.Message.ID
		}
		if turn == rounds/3 || turn == 2*rounds/3 {
			px.cut() // both subscribers lose their connections mid-stream
		}
	}

	log, _, err := admin.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(log)) != last {
		t.Fatalf("log has %d events, want %d", len(log), last)
	}
	for i := 0; i < 2; i++ {
		select {
		case got := <-results:
			if len(got) != len(log) {
				t.Fatalf("subscriber got %d events, log has %d", len(got), len(log))
			}
			for j := range got {
				if got[j].Seq != log[j].Seq || got[j].Type != log[j].Type || string(got[j].Data) != string(log[j].Data) {
					t.Fatalf("subscriber event %d = seq %d %s, log has seq %d %s", j, got[j].Seq, got[j].Type, log[j].Seq, log[j].Type)
				}
			}
		case err := <-errc:
			t.Fatalf("subscriber failed: %v", err)
		case <-ctx.Done():
			t.Fatal("subscribers did not catch up in time")
		}
	}
	if px.cuts < 2 {
		t.Fatalf("proxy cut %d times, want 2", px.cuts)
	}
	final, err := admin.Conversation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if g := final.Guidance; g == nil || g.NextAgentID != "alice" || g.Turn != rounds+1 || g.Kind != parley.GuidanceStartTurn {
		t.Fatalf("final guidance = %+v, want alice (after bob's turn %d) to start turn %d", g, rounds, rounds+1)
	}
}
