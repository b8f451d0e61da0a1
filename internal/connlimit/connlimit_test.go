package connlimit_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/connlimit"
)

const (
	refusal        = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nfull"
	refusalPerAddr = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\naddr"
)

// harness is an http.Server on loopback behind a Listener. Its handler
// answers "ok"; /known marks the client known; /hold waits until release
// is closed; /hijack takes the connection over and holds it.
type harness struct {
	t       *testing.T
	l       *connlimit.Listener
	addr    string
	release chan struct{}
	held    chan struct{} // a request is in /hold or /hijack
}

func serve(t *testing.T, max, perAddr int) *harness {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, l: connlimit.New(tcp, connlimit.Options{Max: max, MaxPerAddr: perAddr, Refusal: []byte(refusal), RefusalPerAddr: []byte(refusalPerAddr)}),
		addr: tcp.Addr().String(), release: make(chan struct{}), held: make(chan struct{}, 16)}
	var hijacked []net.Conn
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/known", func(w http.ResponseWriter, r *http.Request) {
		connlimit.Known(r.Context())
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		h.held <- struct{}{}
		<-h.release
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			hijacked = append(hijacked, c)
		}
		h.held <- struct{}{}
	})
	srv := &http.Server{Handler: mux, ConnState: h.l.ConnState, ConnContext: h.l.ConnContext}
	go srv.Serve(h.l)
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
		srv.Close()
		for _, c := range hijacked {
			c.Close()
		}
	})
	return h
}

// dial connects from the loopback address from (127.0.0.1 if empty) and
// waits until the Listener counts the connection, or refused it.
func (h *harness) dial(from string) net.Conn {
	h.t.Helper()
	d := net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	before := h.l.Stats()
	c, err := d.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	h.until("the connection is accepted", func(s connlimit.Stats) bool {
		return s.Shed+s.Refused+int64(s.Open) > before.Shed+before.Refused+int64(before.Open)
	})
	return c
}

// until waits for the Listener's counts to satisfy ok, failing after 10 s.
func (h *harness) until(what string, ok func(connlimit.Stats) bool) {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(h.l.Stats()); {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not after 10 s (%+v)", what, h.l.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// closed checks that the server closed c, having sent it want (nothing,
// a refusal).
func closed(t *testing.T, what string, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("%s: %v, want the connection closed (read %q)", what, err, got)
	}
	if string(got) != want {
		t.Fatalf("%s: the server sent %q, want %q", what, got, want)
	}
}

// answers checks that c, still open, is answered: the rest of a request
// begun on it, or a whole one.
func answers(t *testing.T, what string, c net.Conn, rest string) {
	t.Helper()
	if _, err := io.WriteString(c, rest); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v, want an answer (the connection was kept)", what, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%s: %d %q", what, resp.StatusCode, body)
	}
}

const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// TestIdleConnectionsMakeRoom: at the bound, a newcomer is taken and an
// idle connection closed for it: one that has sent nothing of a request
// before one whose request is arriving, the oldest first, and a known
// client's only once no unknown one's is left.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	t.Parallel()
	h := serve(t, 4, 0)
	known := h.dial("")
	answers(t, "a known client's request", known, "GET /known HTTP/1.1\r\nHost: x\r\n\r\n")
	first, second := h.dial(""), h.dial("")
	arriving := h.dial("")
	io.WriteString(arriving, "GET / HTTP/1.1\r\n")
	h.until("its request is seen arriving", func(connlimit.Stats) bool { return h.l.Reading() == 1 })
	third := h.dial("") // room: first, the oldest that sent nothing
	closed(t, "the oldest idle connection", first, "")
	h.dial("") // second
	closed(t, "the next oldest", second, "")
	h.dial("") // third: the newer of those that sent nothing
	closed(t, "the third", third, "")
	answers(t, "a connection whose request is arriving, while others sent nothing", arriving, "Host: x\r\n\r\n")
	answers(t, "a known client's, while unknown ones are idle", known, get)
	if s := h.l.Stats(); s.Open != 4 || s.Shed != 3 || s.Refused != 0 {
		t.Fatalf("counts %+v, want 4 open, 3 shed, none refused", s)
	}
}

// TestBusyConnectionsAreKept: a connection whose request is being
// answered, and one taken over (a stream, a WebSocket), are never closed
// to make room: with nothing idle, the newcomer gets the refusal.
func TestBusyConnectionsAreKept(t *testing.T) {
	t.Parallel()
	h := serve(t, 2, 0)
	hold, hijack := h.dial(""), h.dial("")
	io.WriteString(hold, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
	io.WriteString(hijack, "GET /hijack HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.held
	<-h.held
	h.until("both are busy", func(s connlimit.Stats) bool { return s.Idle == 0 })
	closed(t, "a newcomer while every connection is busy", h.dial(""), refusal)
	close(h.release)
	_ = hold.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(hold), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the request held through the refusal: %v", err)
	}
	if _, err := hijack.Write([]byte("x")); err != nil {
		t.Fatalf("the connection taken over: %v", err)
	}
	hold.Close()
	hijack.Close()
	h.until("the closed connections stop counting", func(s connlimit.Stats) bool { return s.Open <= 1 })
}

// TestOneAddressMakesRoomFromItsOwn: an address at its bound makes room by
// closing its own idle connections, not those of other addresses, and is
// refused when none of its own is idle, while other addresses connect.
func TestOneAddressMakesRoomFromItsOwn(t *testing.T) {
	t.Parallel()
	h := serve(t, 4, 2)
	other := h.dial("127.0.0.2")
	mine1, mine2 := h.dial("127.0.0.1"), h.dial("127.0.0.1")
	h.dial("127.0.0.1")
	closed(t, "the address's oldest idle connection", mine1, "")
	h.dial("127.0.0.1")
	closed(t, "its next", mine2, "")
	answers(t, "another address's idle connection", other, get)

	h2 := serve(t, 4, 1)
	busy := h2.dial("127.0.0.1")
	io.WriteString(busy, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h2.held
	h2.until("it is busy", func(s connlimit.Stats) bool { return s.Idle == 0 })
	closed(t, "a newcomer of an address whose only connection is busy", h2.dial("127.0.0.1"), refusalPerAddr)
	answers(t, "another address, meanwhile", h2.dial("127.0.0.2"), get)
}
