//go:build linux

package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// settles waits until the process has at most limit goroutines more than
// before, and fails the test with what it has if not.
func settles(t *testing.T, before, limit int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine()-before > limit && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if extra := runtime.NumGoroutine() - before; extra > limit {
		t.Fatalf("%s: %d goroutines more than before", what, extra)
	}
}

// TestIdleStreamsHoldNoGoroutine: quiet WebSocket and SSE streams hold no
// goroutine of the server's (what they are sent is written by a goroutine
// that runs only while there is something to write, and what their
// clients send is read when it arrives), yet each gets what is published
// at once, and lets its goroutine go again after. The clients are raw
// sockets, which hold no goroutine of their own.
func TestIdleStreamsHoldNoGoroutine(t *testing.T) {
	b := setup(t, engine.Options{}, api.Options{HeartbeatInterval: time.Hour})
	id := b.conversation("alice", "bob")
	auth := "Bearer " + b.viewer
	before := runtime.NumGoroutine()
	const n = 100
	wsConns := make([]net.Conn, n)
	wsReaders := make([]io.ReadWriter, n) // the handshake's reader, and the socket
	sseConns := make([]*bufio.Reader, n)
	dialer := ws.Dialer{Header: ws.HandshakeHeaderHTTP(http.Header{"Authorization": {auth}})}
	for i := range n {
		c, br, _, err := dialer.Dial(b.ctx, wsURL(b, id, ""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		var r io.ReadWriter = c
		if br != nil { // the init frame came with the handshake
			r = struct {
				io.Reader
				io.Writer
			}{br, c}
		}
		if data, err := wsutil.ReadServerText(r); err != nil || !strings.Contains(string(data), `"type":"init"`) {
			t.Fatalf("WebSocket %d: %q %v, want the init frame", i, data, err)
		}
		wsConns[i], wsReaders[i] = c, r
		s, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fmt.Fprintf(s, "GET /v1/conversations/%s/stream HTTP/1.1\r\nHost: parley\r\nAuthorization: %s\r\n\r\n", id, auth)
		sseConns[i] = bufio.NewReader(s)
		readUntil(t, sseConns[i], "event: init")
	}
	settles(t, before, n/10, fmt.Sprintf("%d quiet WebSocket and %d quiet SSE streams", n, n))

	b.post(id, b.alice, "hello everyone", "turn")
	for i, c := range wsConns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			data, err := wsutil.ReadServerText(wsReaders[i])
			if err != nil {
				t.Fatalf("WebSocket %d: %v before the message", i, err)
			}
			if strings.Contains(string(data), "hello everyone") {
				break
			}
		}
	}
	for _, br := range sseConns {
		readUntil(t, br, "hello everyone")
	}
	settles(t, before, n/10, "once the message was written to every stream")
}

// readUntil reads an SSE stream's lines until one holds want.
func readUntil(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				done <- err
				return
			}
			if strings.Contains(line, want) {
				done <- nil
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			if err == io.EOF {
				t.Fatalf("the SSE stream ended before %q", want)
			}
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q on the SSE stream", want)
	}
}
