//go:build linux

package wsconn_test

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/parleyhq/parley/internal/transport/netpoll"
	"github.com/parleyhq/parley/internal/transport/wsconn"
)

// TestWatchHoldsNoGoroutine: connections that Watch drains hold no
// goroutine while their clients are silent, and are still served: a
// ping (even one that arrives in two pieces) is answered, data messages
// (whole or in fragments) are read past, a close frame is answered and
// reported, a client that hangs up and a connection the server closes are
// reported, and the watcher lets go of every one of them.
func TestWatchHoldsNoGoroutine(t *testing.T) {
	type watched struct {
		c    *wsconn.Conn
		gone chan error
	}
	got := make(chan watched, 256)
	url := serve(t, wsconn.Options{ReadLimit: 64}, func(c *wsconn.Conn) {
		w := watched{c, make(chan error, 2)}
		c.Watch(func(err error) { w.gone <- err })
		got <- w
	})
	before := runtime.NumGoroutine()
	const n = 200
	clients := make([]net.Conn, n)
	servers := make([]watched, n)
	for i := range clients {
		conn, _, _, err := ws.Dial(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		clients[i] = conn
		servers[i] = <-got
	}
	// The handlers have returned; what is left is the test's own.
	holdNone(t, before, n)

	write := func(conn net.Conn, f ws.Frame) {
		t.Helper()
		if err := ws.WriteFrame(conn, ws.MaskFrame(f)); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(conn net.Conn, op ws.OpCode, payload string) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, err := ws.ReadHeader(conn)
		if err != nil || h.Length > 125 {
			t.Fatalf("read a header %+v (%v), want a control frame", h, err)
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(conn, p); err != nil || h.OpCode != op || (payload != "" && string(p) != payload) {
			t.Fatalf("read %v %q (%v), want %v %q", h.OpCode, p, err, op, payload)
		}
	}

	// A data message, one in fragments, and pings: each ping answered.
	c := clients[0]
	write(c, ws.NewTextFrame([]byte("read past")))
	write(c, ws.NewFrame(ws.OpText, false, []byte("in ")))
	write(c, ws.NewFrame(ws.OpContinuation, true, []byte("pieces")))
	write(c, ws.NewPingFrame([]byte("one")))
	expect(c, ws.OpPong, "one")
	ping := ws.MustCompileFrame(ws.MaskFrame(ws.NewPingFrame([]byte("two"))))
	if _, err := c.Write(ping[:3]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Write(ping[3:]); err != nil {
		t.Fatal(err)
	}
	expect(c, ws.OpPong, "two")
	// A close frame is answered and reported.
	write(c, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye")))
	expect(c, ws.OpClose, "")
	if err := <-servers[0].gone; !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after the client's close frame: %v", err)
	}

	// A client that hangs up without a word.
	clients[1].Close()
	select {
	case err := <-servers[1].gone:
		if err == nil {
			t.Fatal("a client that hung up was reported with no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a client that hung up was not noticed")
	}

	// A connection the server closes.
	servers[2].c.CloseNow()
	if err := <-servers[2].gone; !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after the server closed: %v", err)
	}

	// A message over the limit closes the connection with 1009.
	write(clients[3], ws.NewBinaryFrame(make([]byte, 100)))
	if _, _, err := wsutil.ReadServerData(clients[3]); err == nil {
		t.Fatal("a message over the limit was read past")
	}
	if err := <-servers[3].gone; !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after a message over the limit: %v", err)
	}

	// Everyone else leaves; the watcher holds none of them after.
	for i := 4; i < n; i++ {
		clients[i].Close()
	}
	for i := 4; i < n; i++ {
		select {
		case <-servers[i].gone:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d: its client's hang-up was not noticed", i)
		}
	}
	for _, w := range servers {
		select {
		case err := <-w.gone:
			t.Fatalf("a connection was reported gone twice (%v)", err)
		default:
		}
	}
	lettingGo(t)
}

// holdNone waits for the goroutines to settle, then fails the test if
// there are more than a few more than before, with n idle connections
// read through the watcher, or if the watcher does not watch them.
func holdNone(t *testing.T, before, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine()-before > n/10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if extra := runtime.NumGoroutine() - before; extra > n/10 {
		t.Fatalf("%d goroutines more with %d idle connections", extra, n)
	}
	if w := netpoll.Watched(); w < n {
		t.Fatalf("the watcher watches %d connections, want %d", w, n)
	}
}

// holdNoBuffer fails the test unless soon no connection holds a read
// buffer lent to it.
func holdNoBuffer(t *testing.T) {
	t.Helper()
	soonNone(t, "read buffers lent to connections waiting for their peers", wsconn.LentReadBuffers)
}

// lettingGo fails the test unless the watcher soon holds no connection.
func lettingGo(t *testing.T) {
	t.Helper()
	soonNone(t, "connections the watcher holds", func() int64 { return int64(netpoll.Watched()) })
}

// soonNone fails the test unless count, polled, comes to 0 within 5 s.
func soonNone(t *testing.T, what string, count func() int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for count() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Fatalf("still %d %s", n, what)
	}
}
