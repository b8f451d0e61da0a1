package netpoll_test

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/transport/netpoll"
)

// pairs returns n connected TCP pairs over loopback: the accepted ends
// (the server's, to watch) and the dialed ones.
func pairs(t *testing.T, n int) (server, client []net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range n {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		server, client = append(server, s), append(client, c)
	}
	return server, client
}

// TestWatchTellsOfEachArrival: ready runs for each arrival while it asks
// for more, never two at once, and not after it said no more, nor after
// Stop; idle watched connections hold no goroutine; the end of the stream
// is an arrival too.
func TestWatchTellsOfEachArrival(t *testing.T) {
	const n = 100
	server, client := pairs(t, n)
	base := netpoll.Watched()
	before := runtime.NumGoroutine()
	type arrival struct {
		i   int
		got string
		err error
	}
	arrivals := make(chan arrival, 16)
	busy := make([]int, n)
	watches := make([]*netpoll.Watcher, n)
	for i, s := range server {
		var ok bool
		watches[i], ok = netpoll.Watch(s, func() bool {
			busy[i]++ // the race detector sees overlapping calls
			defer func() { busy[i]-- }()
			buf := make([]byte, 16)
			k, err := s.Read(buf)
			arrivals <- arrival{i, string(buf[:k]), err}
			return err == nil && string(buf[:k]) != "last"
		})
		if !ok {
			t.Fatal("a TCP connection was not watched")
		}
	}
	if w := netpoll.Watched() - base; w != n {
		t.Fatalf("%d watched, want %d", w, n)
	}
	if extra := runtime.NumGoroutine() - before; extra > n/10 {
		t.Fatalf("%d goroutines more for %d idle watched connections", extra, n)
	}
	next := func() arrival {
		t.Helper()
		select {
		case a := <-arrivals:
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("no arrival reported")
		}
		return arrival{}
	}
	send := func(i int, s string) {
		t.Helper()
		if _, err := client[i].Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"one", "two"} {
		send(7, s)
		if a := next(); a.i != 7 || a.got != s || a.err != nil {
			t.Fatalf("arrival %+v, want %q on 7", a, s)
		}
	}
	send(8, "last") // ready says no more
	if a := next(); a.i != 8 || a.got != "last" {
		t.Fatalf("arrival %+v, want last on 8", a)
	}
	send(8, "unheard")
	watches[9].Stop()
	send(9, "unheard")
	client[10].Close() // the end of the stream
	if a := next(); a.i != 10 || a.err != io.EOF {
		t.Fatalf("arrival %+v, want the end of 10", a)
	}
	select {
	case a := <-arrivals:
		t.Fatalf("heard %+v after no more was asked, or after Stop", a)
	case <-time.After(200 * time.Millisecond):
	}
	// Stopped, answered no, ended: none is watched any more; the rest
	// are stopped before they are closed.
	if w := netpoll.Watched() - base; w != n-3 {
		t.Fatalf("%d watched, want %d", w, n-3)
	}
	for i, w := range watches {
		w.Stop()
		server[i].Close()
	}
	if w := netpoll.Watched() - base; w != 0 {
		t.Fatalf("%d still watched after Stop", w)
	}
}

// TestWatchAClosedConnection: a connection closed before it is watched is
// not watched.
func TestWatchAClosedConnection(t *testing.T) {
	server, _ := pairs(t, 1)
	server[0].Close()
	if _, ok := netpoll.Watch(server[0], func() bool { return true }); ok {
		t.Fatal("a closed connection was watched")
	}
}

// TestTheSetWaitsInGosPoller: with nothing to read, the goroutine that
// serves the epoll set is parked in Go's network poller ("IO wait"), not
// blocked in a system call, from which a busy scheduler would make it wait
// for a core after every arrival.
func TestTheSetWaitsInGosPoller(t *testing.T) {
	server, _ := pairs(t, 1)
	w, ok := netpoll.Watch(server[0], func() bool { return true })
	if !ok {
		t.Fatal("a TCP connection could not be watched")
	}
	defer w.Stop()
	buf := make([]byte, 1<<20)
	var state string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		state = "not found"
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "netpoll.loop(") {
				head, _, _ := strings.Cut(g, "\n")
				_, state, _ = strings.Cut(head, "[")
				state, _, _ = strings.Cut(state, "]")
			}
		}
		if strings.HasPrefix(state, "IO wait") {
			return
		}
	}
	t.Fatalf("the epoll set's goroutine is %q, want IO wait", state)
}
