package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// liveConns are one token's four kinds of live connection: a runner of a
// conversation and an agent-wide runner (nil if none), an SSE stream and
// a WebSocket stream of the conversation, each past its first frame (the
// agent-wide runner sends none first: it is live once dialled).
type liveConns struct {
	runner, wide, ws *websocket.Conn
	sse              func() (sseEvent, error)
}

// liveConns opens a runner of conversation id and one of every
// conversation (both as carol), an SSE and a WebSocket stream of
// conversation id with token ("" for none: an open server).
func (b *bundle) liveConns(id, token string) liveConns {
	b.t.Helper()
	l := b.streams(id, token)
	l.runner = b.dialAs(id, token, "/runner?agentId=carol")
	if ack := send(b.t.(*testing.T), b, l.runner, `{"type":"message.create","turnId":"r1"}`); ack["type"] != "ack" {
		b.t.Fatalf("runner before the revocation: %v", ack)
	}
	l.wide = b.agentRunnerConn("carol", token)
	return l
}

// streams opens an SSE and a WebSocket stream of conversation id with
// token, each past its init.
func (b *bundle) streams(id, token string) liveConns {
	b.t.Helper()
	var l liveConns
	l.ws = b.dialAs(id, token, "/ws")
	if f := readFrame(b.t, b.ctx, l.ws); f["type"] != "init" {
		b.t.Fatalf("ws first frame %v", f)
	}
	_, resp := b.openSSE(id, "", "Authorization", bearer(token))
	l.sse = sseFrames(bufio.NewReader(resp.Body))
	if ev, err := l.sse(); err != nil || ev.event != "init" {
		b.t.Fatalf("SSE first event %v, %v", ev, err)
	}
	return l
}

// bearer is the Authorization header of token ("" for none).
func bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

// dialAs opens the WebSocket path of conversation id with token.
func (b *bundle) dialAs(id, token, path string) *websocket.Conn {
	b.t.Helper()
	c, _, err := websocket.Dial(b.ctx, "ws"+strings.TrimPrefix(b.url, "http")+"/v1/conversations/"+id+path, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {bearer(token)}}})
	if err != nil {
		b.t.Fatalf("dial %s: %v", path, err)
	}
	b.t.Cleanup(func() { c.CloseNow() })
	return c
}

// wantCutOff waits (at most within) for each connection to end with an
// error frame unauthorized, saying why (says), then, on the WebSockets, the
// close code 4401.
func (l liveConns) wantCutOff(t *testing.T, within time.Duration, says string) {
	t.Helper()
	l.wantEnded(t, within, "unauthorized", 4401, says)
}

// wantEnded waits (at most within) for each connection to end with an
// error frame of code, saying says, then, on the WebSockets, the close
// code status. It returns the frames each got before its error frame, by
// name (runner, agent-wide runner, ws, SSE).
func (l liveConns) wantEnded(t *testing.T, within time.Duration, code string, status websocket.StatusCode, says string) map[string][]map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	got := map[string][]map[string]any{}
	for name, c := range map[string]*websocket.Conn{"runner": l.runner, "agent-wide runner": l.wide, "ws": l.ws} {
		if c == nil {
			continue
		}
		var frames []map[string]any
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				if websocket.CloseStatus(err) != status {
					t.Fatalf("%s: ended by %v, want close %d within %s", name, err, status, within)
				}
				break
			}
			frames = append(frames, decode(t, data))
		}
		got[name] = wantErrorFrame(t, name, frames, code, says)
	}
	evs := make(chan sseEvent, 64)
	go func() {
		defer close(evs)
		for {
			ev, err := l.sse()
			if err != nil {
				return
			}
			evs <- ev
		}
	}()
	var frames []map[string]any
	for {
		select {
		case ev, ok := <-evs:
			if ok {
				if ev.event == "error" {
					ev.data["type"] = "error"
				}
				frames = append(frames, ev.data)
				continue
			}
		case <-ctx.Done():
			t.Fatalf("SSE: still open %s after the connection should have ended", within)
		}
		break
	}
	got["SSE"] = wantErrorFrame(t, "SSE", frames, code, says)
	return got
}

// wantErrorFrame checks that the last of frames is an error frame of code
// saying says, and returns those before it.
func wantErrorFrame(t *testing.T, name string, frames []map[string]any, code, says string) []map[string]any {
	t.Helper()
	var last map[string]any
	if len(frames) > 0 {
		last = frames[len(frames)-1]
	}
	e, _ := last["error"].(map[string]any)
	if last["type"] != "error" || e["code"] != code || !strings.Contains(e["message"].(string), says) {
		t.Fatalf("%s: last frame %v, want an error frame %s saying %q", name, last, code, says)
	}
	return frames[:len(frames)-1]
}

// TestRevokingATokenEndsItsConnections: revoking a token through the API
// ends, within 1 s, its runner connection, its agent-wide runner, its SSE
// stream and its WebSocket stream, each with an error frame unauthorized saying the token was
// revoked (and close code 4401); nothing the runner sends afterwards is
// written. Another token's connections carry on.
func TestRevokingATokenEndsItsConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob", "carol")
	secret, tok, err := b.tokens.CreateToken(b.ctx, parley.TokenAgent, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	carol := b.liveConns(id, secret)
	other := b.dialWS(id, "")
	readFrame(t, b.ctx, other) // init
	b.want(b.do("DELETE", "/v1/tokens/"+tok.ID, b.admin, nil), 204, "")
	carol.wantCutOff(t, time.Second, "revoked")

	before := b.log(id)
	err = carol.runner.Write(b.ctx, websocket.MessageText, []byte(`{"type":"message.part.text-delta","turnId":"r1","delta":"after"}`))
	if err == nil {
		t.Fatal("the runner of a revoked token could still send")
	}
	if after := b.log(id); after != before {
		t.Fatalf("a revoked runner wrote:\nbefore %s\nafter  %s", before, after)
	}
	// The viewer's stream still gets what is written.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.admin, map[string]any{"agentId": "carol", "content": "still here"}), 201, "")
	for {
		if f := readFrame(t, b.ctx, other); f["type"] == "message" {
			break
		}
	}
}

// TestRevocationElsewhereEndsConnections: a token revoked in the store by
// someone else (the command line on the file, another node) loses its live
// connections at the next recheck of WatchTokens, and new requests with it
// are refused by then.
func TestRevocationElsewhereEndsConnections(t *testing.T) {
	t.Parallel()
	b, srv := setupServer(t, engine.Options{}, api.Options{Guards: api.Guards{TokenRecheck: 100 * time.Millisecond}})
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go srv.WatchTokens(ctx)
	id := b.conversation("alice", "carol")
	secret, tok, err := b.tokens.CreateToken(b.ctx, parley.TokenAgent, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	carol := b.liveConns(id, secret)
	b.want(b.do("GET", "/v1/conversations/"+id, secret, nil), 200, "") // cached now
	if err := b.db.RevokeToken(b.ctx, tok.ID, parley.NewTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	carol.wantCutOff(t, time.Second, "revoked")
	b.want(b.do("GET", "/v1/conversations/"+id, secret, nil), 401, "unauthorized")
}

// decode parses one JSON frame.
func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}
