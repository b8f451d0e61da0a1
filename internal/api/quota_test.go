package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// wantLimited checks a 429 rate_limited answer with a Retry-After of at
// least one second, and returns it.
func (b *bundle) wantLimited(r response) time.Duration {
	b.t.Helper()
	b.want(r, 429, "rate_limited")
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 {
		b.t.Fatalf("Retry-After %q, want whole seconds ≥ 1", r.header.Get("Retry-After"))
	}
	return time.Duration(secs) * time.Second
}

// TestCreationRate: one token may create conversations and tasks at
// CreateRate a second, CreateBurst at once; past that it gets 429
// rate_limited with Retry-After, and nothing is created, while other
// tokens are not held back. After Retry-After it may create again.
func TestCreationRate(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{CreateRate: 1, CreateBurst: 3}})
	id := b.conversation("alice") // the admin's first
	for range 3 {
		b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{}), 201, "")
	}
	before := b.snapshot()
	wait := b.wantLimited(b.do("POST", "/v1/conversations", b.alice, map[string]any{"title": "one too many"}))
	b.wantLimited(b.do("POST", "/v1/tasks", b.alice, map[string]any{"conversationId": id, "prompt": "x", "everyMs": 60000}))
	if after := b.snapshot(); after != before {
		t.Fatalf("a refused creation wrote something:\nbefore %s\nafter  %s", before, after)
	}
	b.want(b.do("POST", "/v1/conversations", b.bob, map[string]any{}), 201, "")
	b.want(b.do("POST", "/v1/tasks", b.bob, map[string]any{"conversationId": id, "prompt": "x", "everyMs": 60000}), 201, "")
	time.Sleep(wait)
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{}), 201, "")
}

// TestOpenModeIsOneIdentity: on an open server every request without a
// token shares one quota, whatever agent its body names.
func TestOpenModeIsOneIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Open: true, Guards: api.Guards{CreateRate: 0.1, CreateBurst: 2, MaxConnsPerToken: 1}})
	b.want(b.do("POST", "/v1/conversations", "", map[string]any{"title": "a"}), 201, "")
	b.want(b.do("POST", "/v1/conversations", "", map[string]any{"title": "b"}), 201, "")
	b.wantLimited(b.do("POST", "/v1/conversations", "", map[string]any{"title": "c"}))
	id := b.conversation("alice") // the admin token has its own
	ws := "ws" + strings.TrimPrefix(b.url, "http") + "/v1/conversations/" + id
	c, _, err := websocket.Dial(b.ctx, ws+"/runner?agentId=alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, resp, err := websocket.Dial(b.ctx, ws+"/runner?agentId=bob", nil)
	if err == nil || resp == nil || resp.StatusCode != 429 || errorCode(resp) != "rate_limited" {
		t.Fatalf("a second open runner: %v %v, want 429 rate_limited", resp, err)
	}
}

// TestConnectionsPerToken: one token may hold MaxConnsPerToken streams and
// runner connections at once; the next is refused with 429 rate_limited
// and Retry-After before any upgrade, while other tokens connect; once one
// closes, the token may connect again.
func TestConnectionsPerToken(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 2}})
	id := b.conversation("alice", "bob")
	runner := b.runnerConn(id, b.alice)
	_, sse := b.openSSE(id, "", "Authorization", "Bearer "+b.alice)
	if sse.StatusCode != 200 {
		t.Fatalf("alice's SSE stream: %d", sse.StatusCode)
	}
	base := "ws" + strings.TrimPrefix(b.url, "http") + "/v1/conversations/" + id
	for _, path := range []string{"/ws", "/runner"} {
		_, resp, err := websocket.Dial(b.ctx, base+path,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.alice}}})
		if err == nil || resp == nil || resp.StatusCode != 429 || errorCode(resp) != "rate_limited" || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("alice's third connection %s: %v %v, want 429 rate_limited with Retry-After", path, resp, err)
		}
	}
	b.wantLimited(b.do("GET", "/v1/conversations/"+id+"/stream", b.alice, nil))
	b.runnerConn(id, b.bob)
	b.dialWS(id, "")

	runner.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.alice}}})
		if err == nil {
			c.CloseNow()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice could not connect again after closing one: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunnerConnectRate: one token may open runner connections (agent-wide
// or of a conversation: one bucket) at RunnerConnectRate a second,
// RunnerConnectBurst at once, however short-lived; a storm of connects past
// that is refused with 429 rate_limited and Retry-After before any
// handshake, while other tokens connect. After Retry-After it may connect
// again.
func TestRunnerConnectRate(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{RunnerConnectRate: 1, RunnerConnectBurst: 3}})
	id := b.conversation("alice", "bob")
	for range 2 {
		b.agentRunnerConn("alice", b.alice).CloseNow()
	}
	b.runnerConn(id, b.alice).CloseNow()
	base := "ws" + strings.TrimPrefix(b.url, "http")
	auth := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.alice}}}
	var wait time.Duration
	for i := range 20 {
		for _, path := range []string{"/v1/agents/alice/runner", "/v1/conversations/" + id + "/runner"} {
			_, resp, err := websocket.Dial(b.ctx, base+path, auth)
			if err == nil || resp == nil || resp.StatusCode != 429 || errorCode(resp) != "rate_limited" {
				t.Fatalf("connect %d past the burst, %s: %v %v, want 429 rate_limited", i, path, resp, err)
			}
			secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || secs < 1 {
				t.Fatalf("Retry-After %q, want whole seconds ≥ 1", resp.Header.Get("Retry-After"))
			}
			wait = time.Duration(secs) * time.Second
		}
	}
	b.agentRunnerConn("bob", b.bob).CloseNow() // another token is not held back
	time.Sleep(wait)
	b.agentRunnerConn("alice", b.alice)
}

// TestQuietStreamsEndWhenTheClientLeaves: a stream with nothing to send
// still sees its client leave, and gives its connection back to the
// token at once (not at the next heartbeat): over SSE, a client that
// drops its connection; over WebSocket, one that drops it without a close
// frame, and one that sends a close frame.
func TestQuietStreamsEndWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 1}})
	id := b.conversation("alice", "bob")
	auth := http.Header{"Authorization": {"Bearer " + b.alice}}
	// again connects over WebSocket, as the token's only connection, once
	// the server has let the last one go.
	again := func(what string) *websocket.Conn {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, _, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: auth})
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the token could not connect again: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	ctx, cancel := context.WithCancel(b.ctx)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/v1/conversations/"+id+"/stream", nil)
	req.Header = auth.Clone()
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the SSE stream: %v %v", resp, err)
	}
	b.wantLimited(b.do("GET", "/v1/conversations/"+id+"/stream", b.alice, nil))
	cancel() // drops the connection
	resp.Body.Close()

	c := again("after an SSE client left")
	c.CloseNow() // no close frame
	c = again("after a WebSocket client dropped its connection")
	if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatalf("close handshake: %v", err)
	}
	again("after a WebSocket client closed").CloseNow()
}
