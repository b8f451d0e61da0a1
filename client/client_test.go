package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/sqlite"
)

// server runs the real API, open, on loopback for the client to talk to.
func server(t *testing.T) (*client.Client, context.Context) {
	t.Helper()
	_, url, ctx := serve(t, engine.Options{}, api.Options{Open: true})
	return client.New(url, ""), ctx
}

// serve runs the real API on a SQLite file over loopback and returns its
// engine (for tokens), its URL and a context that ends with the test.
func serve(t *testing.T, eopts engine.Options, aopts api.Options) (*engine.Engine, string, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(db, eopts)
	rn := runners.New(eng, db, runners.Options{})
	srv := httptest.NewServer(api.New(eng, rn, reads.New(db, eng), aopts))
	t.Cleanup(func() { srv.Close(); rn.Close(); eng.Close(); db.Close() })
	return eng, srv.URL, ctx
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

// TestAFailedCallReturnsNoResult: every call that fails returns a nil
// result with its error, never a half-filled one.
func TestAFailedCallReturnsNoResult(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: "mine"}); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() (any, error){
		"PostMessage":  func() (any, error) { return c.PostMessage(ctx, id, client.Message{AgentID: "b", Content: "no"}) },
		"Conversation": func() (any, error) { return c.Conversation(ctx, "nope") },
		"CreateConversation": func() (any, error) {
			return c.CreateConversation(ctx, client.NewConversation{ID: id})
		},
		"Claim":     func() (any, error) { return c.Claim(ctx, id, "b", 0) },
		"Reset":     func() (any, error) { return c.Reset(ctx, "nope", "b", false) },
		"AbortTurn": func() (any, error) { return c.AbortTurn(ctx, "nope", "b", "") },
		"Message":   func() (any, error) { return c.Message(ctx, id, "nope") },
	}
	for name, call := range calls {
		res, err := call()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if v := reflect.ValueOf(res); !v.IsNil() {
			t.Errorf("%s failed (%v) and returned %+v, want nil", name, err, res)
		}
	}
}

// TestConnectRunnerReturnsTheRefusal: a refused runner handshake returns
// the server's status, code and message, not a code that says retry.
func TestConnectRunnerReturnsTheRefusal(t *testing.T) {
	t.Parallel()
	eng, url, ctx := serve(t, engine.Options{}, api.Options{})
	admin, _, err := eng.CreateToken(ctx, parley.TokenAdmin, "", "")
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, err := eng.CreateToken(ctx, parley.TokenViewer, "", "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.New(url, admin).CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, token, conv, agent string
		status                   int
		code                     string
	}{
		{"a bad token", "pt_nonsense", v.Conversation.ID, "bot", 401, parley.EUNAUTHORIZED},
		{"a viewer token", viewer, v.Conversation.ID, "bot", 403, parley.EFORBIDDEN},
		{"an unknown conversation", admin, "nope", "bot", 404, parley.ENOTFOUND},
		{"an admin naming no agent", admin, v.Conversation.ID, "", 422, parley.EINVALIDVALUE},
	}
	for _, c := range cases {
		_, err := client.New(url, c.token).ConnectRunner(ctx, c.conv, c.agent)
		var se *client.StatusError
		if !errors.As(err, &se) || se.Status != c.status || parley.ErrorCode(err) != c.code || se.Err.Message == "" {
			t.Errorf("%s: %v, want HTTP %d %s with the server's message", c.name, err, c.status, c.code)
		}
	}
}

// TestDeleteConversation deletes a conversation that a stream follows: the
// stream stops with not_found (the server's error frame, then a 404 on
// reconnecting), and so does every later call.
func TestDeleteConversation(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	transports := []client.Transport{client.SSE, client.WebSocket}
	var streams []*client.Stream
	for _, transport := range transports {
		st := c.Subscribe(ctx, id, client.SubscribeOptions{Transport: transport})
		defer st.Close()
		if f, err := st.Next(ctx); err != nil || f.Type != "init" {
			t.Fatalf("%s: first frame %+v, %v", transport, f, err)
		}
		streams = append(streams, st)
	}
	if err := c.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	for i, st := range streams {
		if _, err := st.Next(ctx); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("%s after the delete: %v, want not_found", transports[i], err)
		}
	}
	if _, err := c.Conversation(ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("after the delete: %v", err)
	}
	if err := c.DeleteConversation(ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("deleting again: %v", err)
	}
}
