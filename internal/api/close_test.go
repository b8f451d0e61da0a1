package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gobwas/ws"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// The server's heartbeat in these tests is an hour: a close or a departure
// noticed only at the next heartbeat would time the test out, so each one
// passes only if the server noticed at once. The times are logged, not
// asserted.

// closeFixture is a server with an hour's heartbeat on which alice's token
// may hold one connection, so that whether her last one was released
// shows in whether she may connect again.
func closeFixture(t *testing.T) (*bundle, string) {
	t.Helper()
	b := setup(t, engine.Options{}, api.Options{HeartbeatInterval: time.Hour, Guards: api.Guards{MaxConnsPerToken: 1}})
	return b, b.conversation("alice", "bob")
}

// dialAs opens a stream over WebSocket with a token and reads its init.
func dialAs(t *testing.T, b *bundle, id, token string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	if f := readFrame(t, b.ctx, c); f["type"] != "init" {
		t.Fatalf("first frame %v, want init", f)
	}
	return c
}

// connectsAgain waits until alice's token may open a stream again: her
// last connection was released. It fails the test at its deadline.
func connectsAgain(t *testing.T, b *bundle, id string) {
	t.Helper()
	for {
		c, resp, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.alice}}})
		if err == nil {
			c.CloseNow()
			return
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("connecting again: %v %v, want the stream or 429 while the last one is counted", resp, err)
		}
		select {
		case <-b.ctx.Done():
			t.Fatal("the server still counts the connection the client left")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestStreamAnswersCloseAtOnce: a client's close frame is answered at once,
// on an idle stream and on a busy one: the server echoes the close, ends
// the stream and releases the connection, without waiting for its
// heartbeat.
func TestStreamAnswersCloseAtOnce(t *testing.T) {
	t.Parallel()
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		b, id := closeFixture(t)
		c := dialAs(t, b, id, b.alice)
		start := time.Now()
		if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
			t.Fatalf("close handshake: %v", err)
		}
		t.Logf("idle stream: the close handshake took %v", time.Since(start))
		connectsAgain(t, b, id)
		t.Logf("idle stream: released %v after the close frame", time.Since(start))
	})
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		b, id := closeFixture(t)
		c := dialAs(t, b, id, b.alice)
		ctx, stop := context.WithCancel(b.ctx)
		done := make(chan struct{})
		go func() { // bob writes until the client has gone
			defer close(done)
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/v1/conversations/"+id+"/messages", strings.NewReader(`{"content":"more","finality":"none"}`))
				req.Header.Set("Authorization", "Bearer "+b.bob)
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
		defer func() { stop(); <-done }()
		readFrame(t, b.ctx, c) // events flow
		start := time.Now()
		if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
			t.Fatalf("close handshake: %v", err)
		}
		t.Logf("busy stream: the close handshake took %v", time.Since(start))
		connectsAgain(t, b, id)
	})
}

// TestStreamNoticesDepartureAtOnce: a stream whose client half-closes its
// connection, or drops it without a close frame, is ended and its
// connection released at once, over WebSocket and SSE.
func TestStreamNoticesDepartureAtOnce(t *testing.T) {
	t.Parallel()
	t.Run("ws half-close", func(t *testing.T) {
		t.Parallel()
		b, id := closeFixture(t)
		d := ws.Dialer{Header: ws.HandshakeHeaderHTTP(http.Header{"Authorization": {"Bearer " + b.alice}})}
		conn, br, _, err := d.Dial(b.ctx, wsURL(b, id, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var rd io.Reader = conn
		if br != nil {
			rd = io.MultiReader(br, conn)
		}
		if payload, err := readServerFrame(rd); err != nil || !strings.Contains(string(payload), `"type":"init"`) {
			t.Fatalf("first frame %.80s, %v; want init", payload, err)
		}
		deadline, _ := b.ctx.Deadline()
		_ = conn.SetReadDeadline(deadline)
		start := time.Now()
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		// The server closes its side: the read ends, rather than at the deadline.
		if _, err := io.Copy(io.Discard, rd); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("after the client's half-close: %v, want the server to close", err)
		}
		t.Logf("ws half-close: the server closed %v after", time.Since(start))
		connectsAgain(t, b, id)
	})
	t.Run("ws gone", func(t *testing.T) {
		t.Parallel()
		b, id := closeFixture(t)
		c := dialAs(t, b, id, b.alice)
		start := time.Now()
		c.CloseNow()
		connectsAgain(t, b, id)
		t.Logf("ws gone without a close frame: released %v after", time.Since(start))
	})
	t.Run("sse gone", func(t *testing.T) {
		t.Parallel()
		b, id := closeFixture(t)
		next, resp := b.openSSE(id, "", "Authorization", "Bearer "+b.alice)
		if ev := next(); ev.event != "init" {
			t.Fatalf("first SSE event %q, want init", ev.event)
		}
		start := time.Now()
		resp.Body.Close()
		connectsAgain(t, b, id)
		t.Logf("sse gone: released %v after", time.Since(start))
	})
}

// TestRunnerAnswersCloseAtOnce: a runner connection's close frame is
// answered at once too.
func TestRunnerAnswersCloseAtOnce(t *testing.T) {
	t.Parallel()
	b, id := closeFixture(t)
	c := b.runnerConn(id, b.alice)
	start := time.Now()
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("close handshake: %v", err)
	}
	t.Logf("runner: the close handshake took %v", time.Since(start))
	connectsAgain(t, b, id)
}

// readServerFrame reads one unmasked frame of at most 1 MiB from the server.
func readServerFrame(r io.Reader) ([]byte, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return nil, err
	}
	if h.Length > 1<<20 {
		return nil, fmt.Errorf("a frame of %d bytes", h.Length)
	}
	payload := make([]byte, h.Length)
	_, err = io.ReadFull(r, payload)
	return payload, err
}
