package wsconn_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/transport/wsconn"
)

// serve runs handle on each upgraded connection of a test server.
func serve(t *testing.T, o wsconn.Options, handle func(*wsconn.Conn)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := wsconn.Upgrade(w, r, o)
		if err != nil {
			return
		}
		go handle(c)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dial(t *testing.T, url string, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header})
}

// TestOrigins: no Origin, the same origin and an allowed pattern are
// accepted; another origin is refused with 403 before any upgrade.
func TestOrigins(t *testing.T) {
	url := serve(t, wsconn.Options{OriginPatterns: []string{"*.example.com"}}, func(c *wsconn.Conn) { c.Close(wsconn.StatusNormal, "") })
	host := strings.TrimPrefix(url, "ws://")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + host, true},
		{"https://app.example.com", true},
		{"https://evil.test", false},
		{"::not a url", false},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		c, resp, err := dial(t, url, h)
		switch {
		case tc.ok && err != nil:
			t.Errorf("origin %q refused: %v", tc.origin, err)
		case !tc.ok && (err == nil || resp == nil || resp.StatusCode != http.StatusForbidden):
			t.Errorf("origin %q: %v, want 403", tc.origin, err)
		}
		if c != nil {
			c.CloseNow()
		}
	}
}

// TestReadAndLimit: Read returns each message whole (fragments joined),
// answers pings, and closes with 1009 on a message over the limit.
func TestReadAndLimit(t *testing.T) {
	got := make(chan string, 4)
	url := serve(t, wsconn.Options{ReadLimit: 1024, BufferedReads: true}, func(c *wsconn.Conn) {
		for {
			m, err := c.Read()
			if err != nil {
				close(got)
				return
			}
			got <- string(m)
		}
	})
	c, _, err := dial(t, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	go func() { _, _, _ = c.Read(ctx) }() // to see pongs and the close
	if err := c.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	w, err := c.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"frag", "mented"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if m := <-got; m != "hello" {
		t.Fatalf("first message %q", m)
	}
	if m := <-got; m != "fragmented" {
		t.Fatalf("second message %q", m)
	}
	_ = c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("x", 2048)))
	if _, open := <-got; open {
		t.Fatal("a message over the limit was read")
	}
}

// TestClosedPeerReadsWhy: a connection the server closes while the peer
// is still writing (here a message far over the limit) lets the peer read
// the close frame and its status, rather than a reset that takes the
// frame with it, and lets its write of a message shorter than what the
// server reads past go through.
func TestClosedPeerReadsWhy(t *testing.T) {
	url := serve(t, wsconn.Options{ReadLimit: 1024}, func(c *wsconn.Conn) {
		for {
			if _, err := c.Read(); err != nil {
				return
			}
		}
	})
	for _, size := range []int{64 << 10, 512 << 10} {
		c, _, err := dial(t, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		read := make(chan error, 1)
		go func() {
			_, _, err := c.Read(ctx)
			read <- err
		}()
		if err := c.Write(ctx, websocket.MessageText, bytes.Repeat([]byte("x"), size)); err != nil {
			t.Errorf("a %d-byte message: the write failed: %v", size, err)
		}
		if err := <-read; websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Errorf("a %d-byte message: the read ended with %v, want a close with 1009", size, err)
		}
		cancel()
		c.CloseNow()
	}
}

// TestNothingReadAfterClose: once the server closed a connection, Read
// returns ErrClosed, though the peer goes on sending and the socket is
// still read past for a moment.
func TestNothingReadAfterClose(t *testing.T) {
	after := make(chan error, 1)
	url := serve(t, wsconn.Options{ReadLimit: 1024}, func(c *wsconn.Conn) {
		if _, err := c.Read(); err != nil {
			after <- err
			return
		}
		c.Close(wsconn.StatusPolicy, "cut off")
		_, err := c.Read()
		after <- err
	})
	c, _, err := dial(t, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 20 {
		if c.Write(ctx, websocket.MessageText, []byte("frame")) != nil {
			break
		}
	}
	if err := <-after; !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("a Read after Close got %v, want ErrClosed", err)
	}
}

// TestLingeringIsBounded: a socket the server closes is read past for a
// moment, and then let go (the count of such sockets falls back); once
// MaxLingering are read past at once, the next is closed at once.
func TestLingeringIsBounded(t *testing.T) {
	closed := make(chan struct{}, 1)
	url := serve(t, wsconn.Options{ReadLimit: 1024}, func(c *wsconn.Conn) {
		if _, err := c.Read(); err == nil {
			c.Close(wsconn.StatusPolicy, "cut off")
		}
		closed <- struct{}{}
	})
	closeOne := func(want int64) { // the client's end stays open meanwhile
		t.Helper()
		c, _, err := dial(t, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Write(ctx, websocket.MessageText, []byte("frame")); err != nil {
			t.Fatal(err)
		}
		<-closed
		if n := wsconn.Lingering(); n != want {
			t.Fatalf("%d sockets read past after a close, want %d", n, want)
		}
	}
	letGo := func() { // the sockets of tests before, and this one's
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); wsconn.Lingering() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d sockets still read past", wsconn.Lingering())
			}
		}
	}
	letGo()
	closeOne(1)
	letGo()
	wsconn.SetLingering(wsconn.MaxLingering)
	defer wsconn.SetLingering(0)
	closeOne(wsconn.MaxLingering) // at the bound: closed at once
}

// TestWriteTimeout: with a write timeout, a batch to a peer that stops
// reading fails rather than blocking; and a connection idle for longer
// than the timeout (its deadline long past) still writes, and answers
// pings, when it is next used.
func TestWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	idle := make(chan error, 1)
	stuck := make(chan error, 1)
	url := serve(t, wsconn.Options{WriteTimeout: timeout}, func(c *wsconn.Conn) {
		if err := c.WriteText([]byte("first")); err != nil {
			idle <- err
			return
		}
		if err := c.Flush(); err != nil {
			idle <- err
			return
		}
		time.Sleep(3 * timeout) // the deadline set for the first batch is past
		err := c.WriteText([]byte("after a while"))
		if err == nil {
			err = c.Flush()
		}
		idle <- err
		if _, err := c.Read(); err != nil { // answers the client's ping on the way
			return
		}
		// The client reads no more: the batches pile up in the socket's
		// buffers until a write blocks, and fails.
		big := bytes.Repeat([]byte("x"), 64<<10)
		for range 4096 {
			if err := c.WriteText(big); err != nil {
				stuck <- err
				return
			}
			if err := c.Flush(); err != nil {
				stuck <- err
				return
			}
		}
		stuck <- nil
	})
	c, _, err := dial(t, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, want := range []string{"first", "after a while"} {
		if _, p, err := c.Read(ctx); err != nil || string(p) != want {
			t.Fatalf("read %q, %v; want %q", p, err, want)
		}
	}
	if err := <-idle; err != nil {
		t.Fatalf("a write after an idle spell longer than the timeout: %v", err)
	}
	go func() { _, _, _ = c.Read(ctx) }() // to see the pong, then never again
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		t.Fatalf("ping after an idle spell: %v", err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("go on")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stuck:
		if err == nil {
			t.Fatal("256 MiB written to a peer that reads nothing, with no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to a peer that reads nothing blocked past the write timeout")
	}
}

// TestAbort: Abort, from another goroutine, makes a write blocked on a
// peer that reads nothing fail at once, whatever the write timeout, and
// every write after it.
func TestAbort(t *testing.T) {
	conns := make(chan *wsconn.Conn, 1)
	stuck := make(chan error, 1)
	url := serve(t, wsconn.Options{WriteTimeout: time.Hour}, func(c *wsconn.Conn) {
		conns <- c
		big := bytes.Repeat([]byte("x"), 64<<10)
		for { // the peer reads nothing: a write blocks, until Abort
			err := c.WriteText(big)
			if err == nil {
				err = c.Flush()
			}
			if err != nil {
				stuck <- err
				return
			}
		}
	})
	c, _, err := dial(t, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	conn := <-conns
	conn.Abort()
	select {
	case err := <-stuck:
		if err == nil {
			t.Fatal("no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to a peer that reads nothing went on blocking after Abort")
	}
	if err := conn.WriteText([]byte("after")); err == nil {
		if err = conn.Flush(); err == nil {
			t.Fatal("a write after Abort succeeded")
		}
	}
}
