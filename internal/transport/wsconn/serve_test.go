//go:build linux

package wsconn_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/parleyhq/parley/internal/transport/wsconn"
)

// served is one connection Serve reads in a test: what it handed over,
// and how it ended.
type served struct {
	c    *wsconn.Conn
	msgs chan string
	done chan error
	// busy counts handle and done calls under way: never more than one.
	busy atomic.Int32
	// block, when set, is waited for by handle before it returns.
	block chan struct{}
	stop  string // handle asks to stop on this message
}

// enter and leave bracket a call of handle or done; two at once fail.
func (s *served) enter(t *testing.T) {
	if s.busy.Add(1) != 1 {
		t.Error("handle or done called while another ran")
	}
}

func (s *served) leave() { s.busy.Add(-1) }

// serveAll starts a test server whose connections Serve reads, reads
// buffered as a runner's are, and dials n clients to it.
func serveAll(t *testing.T, n int, setup func(i int, s *served)) ([]net.Conn, []*served) {
	t.Helper()
	var mu sync.Mutex
	var next int
	got := make(chan *served, n)
	url := serve(t, wsconn.Options{ReadLimit: 64, BufferedReads: true}, func(c *wsconn.Conn) {
		s := &served{c: c, msgs: make(chan string, 64), done: make(chan error, 2)}
		mu.Lock()
		setup(next, s)
		next++
		mu.Unlock()
		c.Serve(func(msg []byte) bool {
			s.enter(t)
			defer s.leave()
			s.msgs <- string(msg)
			if s.block != nil {
				<-s.block
			}
			return string(msg) != s.stop
		}, func(err error) {
			s.enter(t)
			defer s.leave()
			s.done <- err
		})
		got <- s
	})
	clients := make([]net.Conn, n)
	servers := make([]*served, n)
	for i := range clients {
		conn, _, _, err := ws.Dial(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients[i] = conn
		servers[i] = <-got
	}
	return clients, servers
}

// recv waits for what a served connection hands over, or for its end.
func recv[T any](t *testing.T, c chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("waited in vain for %s", what)
	}
	var zero T
	return zero
}

// TestServeHoldsNoGoroutine: connections Serve reads hold no goroutine
// while their clients are silent, and every message is handed over once,
// in order: several that arrive in one packet (the read buffer holds the
// rest, which no epoll reports), one in fragments, one split between two
// packets. A handle that blocks holds the next message back; one that
// asks to stop ends the reading (done with nil). The server closing a
// connection while handle runs ends it only once handle has returned, and
// nothing is handed over after.
func TestServeHoldsNoGoroutine(t *testing.T) {
	const n = 100
	before := runtime.NumGoroutine()
	clients, servers := serveAll(t, n, func(i int, s *served) {
		switch i {
		case 2:
			s.stop = "stop"
		case 3:
			s.block = make(chan struct{})
		}
	})
	holdNone(t, before, n)
	frame := func(f ws.Frame) []byte { return ws.MustCompileFrame(ws.MaskFrame(f)) }
	send := func(conn net.Conn, b []byte) {
		t.Helper()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	// Ten messages in one packet, then a message in fragments with a ping
	// between them, then one split between two packets.
	var packet bytes.Buffer
	for i := range 10 {
		packet.Write(frame(ws.NewTextFrame(fmt.Appendf(nil, "m%d", i))))
	}
	send(clients[0], packet.Bytes())
	for i := range 10 {
		if got, want := recv(t, servers[0].msgs, "a message of the packet"), fmt.Sprintf("m%d", i); got != want {
			t.Fatalf("handed %q, want %q", got, want)
		}
	}
	send(clients[0], append(append(frame(ws.NewFrame(ws.OpText, false, []byte("in "))),
		frame(ws.NewPingFrame([]byte("p")))...), frame(ws.NewFrame(ws.OpContinuation, true, []byte("pieces")))...))
	if got := recv(t, servers[0].msgs, "the fragmented message"); got != "in pieces" {
		t.Fatalf("handed %q, want the fragments joined", got)
	}
	split := frame(ws.NewTextFrame([]byte("split")))
	send(clients[0], split[:4])
	time.Sleep(50 * time.Millisecond)
	send(clients[0], split[4:])
	if got := recv(t, servers[0].msgs, "the split message"); got != "split" {
		t.Fatalf("handed %q, want split", got)
	}
	// Waiting for its client again, no connection holds a read buffer:
	// each was lent one only while it read.
	holdNoBuffer(t)

	clients[0].Close()
	if err := recv(t, servers[0].done, "the end of a client that hung up"); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after a hang-up: %v", err)
	}

	// A client that hangs up at once.
	clients[1].Close()
	if err := recv(t, servers[1].done, "the end of a client that hung up"); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after a hang-up: %v", err)
	}

	// handle asks to stop: nothing after is handed over.
	send(clients[2], append(frame(ws.NewTextFrame([]byte("stop"))), frame(ws.NewTextFrame([]byte("after")))...))
	recv(t, servers[2].msgs, "the stopping message")
	if err := recv(t, servers[2].done, "the end after stop"); err != nil {
		t.Fatalf("handle asked to stop, and done was told %v", err)
	}

	// handle blocks: the next message waits, and the server's close ends
	// the reading only when handle returns.
	s := servers[3]
	send(clients[3], frame(ws.NewTextFrame([]byte("first"))))
	recv(t, s.msgs, "the first message")
	send(clients[3], frame(ws.NewTextFrame([]byte("second"))))
	s.c.CloseNow()
	select {
	case m := <-s.msgs:
		t.Fatalf("%q handed over while handle was blocked", m)
	case err := <-s.done:
		t.Fatalf("done (%v) while handle was blocked", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(s.block)
	if err := recv(t, s.done, "the end after the server's close"); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after the server's close: %v", err)
	}
	select {
	case m := <-s.msgs:
		t.Fatalf("%q handed over after the server closed", m)
	default:
	}

	// An idle connection the server closes.
	servers[4].c.CloseNow()
	if err := recv(t, servers[4].done, "the end after the server's close"); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("after the server's close: %v", err)
	}

	// Everyone else leaves; each is ended once, and the watcher holds none.
	for i := 5; i < n; i++ {
		clients[i].Close()
	}
	for i := 5; i < n; i++ {
		recv(t, servers[i].done, "the end of a client that left")
	}
	for i, s := range servers {
		select {
		case err := <-s.done:
			t.Fatalf("connection %d ended twice (%v)", i, err)
		default:
		}
	}
	lettingGo(t)
}

// TestServeFramesBeforeTheHandshake: a client that sends frames in the same
// packet as its upgrade request (read into the HTTP server's buffer, which
// no epoll sees) is read by a goroutine of its own, and every message is
// handed over in order, those sent before the answer and after it.
func TestServeFramesBeforeTheHandshake(t *testing.T) {
	msgs := make(chan string, 8)
	url := serve(t, wsconn.Options{ReadLimit: 64, BufferedReads: true}, func(c *wsconn.Conn) {
		c.Serve(func(msg []byte) bool {
			msgs <- string(msg)
			return true
		}, func(error) {})
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "ws://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	frame := func(s string) []byte { return ws.MustCompileFrame(ws.MaskFrame(ws.NewTextFrame([]byte(s)))) }
	req := "GET / HTTP/1.1\r\nHost: " + strings.TrimPrefix(url, "ws://") + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := conn.Write(append(append([]byte(req), frame("one")...), frame("two")...)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if _, err := conn.Write(frame("three")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two", "three"} {
		if got := recv(t, msgs, "a message"); got != want {
			t.Fatalf("handed %q, want %q", got, want)
		}
	}
}

// roomBudget is a Budget of max bytes that counts what it lent.
type roomBudget struct {
	max  int64
	used atomic.Int64
}

func (b *roomBudget) Reserve(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *roomBudget) Release(n int64) { b.used.Add(-n) }

// TestLargeMessagesTakeRoom: a message over LargeMessage is read only with
// room for it from the budget, held while it is read and handled and
// given back after: whole, or grown frame by frame. A connection the
// budget has no room for is closed with 1013 (try again later); one whose
// large frame stalls is closed after the read timeout, and gives its room
// back.
func TestLargeMessagesTakeRoom(t *testing.T) {
	budget := &roomBudget{max: 300 << 10}
	during := make(chan int64, 8)
	ended := make(chan error, 8)
	url := serve(t, wsconn.Options{ReadLimit: 1 << 20, BufferedReads: true, Budget: budget, ReadTimeout: 300 * time.Millisecond}, func(c *wsconn.Conn) {
		c.Serve(func(msg []byte) bool {
			during <- budget.used.Load()
			return true
		}, func(err error) { ended <- err })
	})
	dial := func() net.Conn {
		t.Helper()
		conn, _, _, err := ws.Dial(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	frame := func(f ws.Frame) []byte { return ws.MustCompileFrame(ws.MaskFrame(f)) }
	big := frame(ws.NewTextFrame(bytes.Repeat([]byte("x"), 200<<10)))

	a := dial()
	if _, err := a.Write(big); err != nil {
		t.Fatal(err)
	}
	if held := recv(t, during, "a large message"); held != 200<<10 {
		t.Fatalf("handling a 200 KiB message, the budget lends %d bytes", held)
	}
	half := bytes.Repeat([]byte("y"), 40<<10)
	if _, err := a.Write(append(frame(ws.NewFrame(ws.OpText, false, half)), frame(ws.NewFrame(ws.OpContinuation, true, half))...)); err != nil {
		t.Fatal(err)
	}
	if held := recv(t, during, "a message of two 40 KiB frames"); held != 80<<10 {
		t.Fatalf("handling an 80 KiB message in two frames, the budget lends %d bytes", held)
	}

	// a stalls inside a large frame, holding 200 KiB: b's finds no room.
	if _, err := a.Write(big[:len(big)/2]); err != nil {
		t.Fatal(err)
	}
	for budget.used.Load() != 200<<10 {
		time.Sleep(time.Millisecond)
	}
	b := dial()
	if _, err := b.Write(big); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, err := ws.ReadHeader(b)
	if err != nil || h.OpCode != ws.OpClose || h.Length > 125 {
		t.Fatalf("a large message without room: %v %v, want a close frame", h, err)
	}
	payload := make([]byte, h.Length)
	if _, err := io.ReadFull(b, payload); err != nil {
		t.Fatal(err)
	}
	if code, _ := ws.ParseCloseFrameData(payload); code != wsconn.StatusTryAgain {
		t.Fatalf("a large message without room: closed with %d, want 1013", code)
	}
	recv(t, ended, "the end of the connection without room")
	recv(t, ended, "the end of the stalled connection, at the read timeout")
	if used := budget.used.Load(); used != 0 {
		t.Fatalf("%d bytes of the budget still lent once every connection ended", used)
	}
}
