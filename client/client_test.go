package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/sqlite"
)

// server runs the real API on loopback for the client to talk to.
func server(t *testing.T) (*client.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(db, engine.Options{})
	srv := httptest.NewServer(api.New(eng, api.Options{Open: true}))
	t.Cleanup(func() { srv.Close(); eng.Close(); db.Close() })
	return client.New(srv.URL, ""), ctx
}

func TestErrorsCarryCodeStatusAndHead(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "a", Content: "mine"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "b", Content: "no"})
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != 409 || parley.ErrorCode(err) != parley.ETURNCONFLICT || se.Err.Head == nil || se.Err.Head.OpenTurn.Owner != "a" {
		t.Fatalf("err = %#v", err)
	}
	if _, err := c.Conversation(ctx, "nope"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("unknown conversation: %v", err)
	}
}

func TestStreamResumesFromAPositionAndStopsOnFatalErrors(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, _ := c.CreateConversation(ctx, client.NewConversation{})
	id := v.Conversation.ID
	for i := 0; i < 3; i++ {
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: "x", Finality: parley.FinalityTurn}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range []client.Transport{client.SSE, client.WebSocket} {
		st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 2}, Transport: tr})
		t.Cleanup(st.Close)
		f, err := st.Next(ctx)
		if err != nil || f.Init == nil || !f.Init.Recovered {
			t.Fatalf("%s: first frame %+v, %v", tr, f, err)
		}
		for want := int64(3); want <= 4; want++ {
			f, err := st.Next(ctx)
			if err != nil || f.Event == nil || f.Event.Seq != want {
				t.Fatalf("%s: frame %+v, %v; want seq %d", tr, f, err, want)
			}
		}
		if p := st.Position(); p.Seq != 4 || p.Epoch != v.Conversation.Epoch {
			t.Fatalf("%s: position %+v, want seq 4 in epoch %s (the server fills in the epoch)", tr, p, v.Conversation.Epoch)
		}
	}
	st := c.Subscribe(ctx, "nope", client.SubscribeOptions{})
	if _, err := st.Next(ctx); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("stream of an unknown conversation: %v, want not_found without retrying", err)
	}
}
