package loadgen

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gobwas/ws"
)

// TestRunnerConn: the runner's client reads a message the server sent in
// fragments and one sent whole, answers a ping with a pong of its payload,
// sends what it writes as masked text messages that the server reads back
// intact, refuses a message over its bound, and a refused handshake names
// its status.
func TestRunnerConn(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 70_000) // a 64-bit length
	got := make(chan ws.Frame, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refused" {
			http.Error(w, "no", http.StatusTooManyRequests)
			return
		}
		conn, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer conn.Close()
		read := make(chan struct{})
		go func() { // read while writing: the last message is never read whole
			defer close(read)
			for {
				h, err := ws.ReadHeader(conn)
				if err != nil || h.Length > 1<<20 {
					close(got)
					return
				}
				f := ws.Frame{Header: h, Payload: make([]byte, h.Length)}
				if _, err := io.ReadFull(conn, f.Payload); err != nil {
					close(got)
					return
				}
				if f.Header.Masked {
					ws.Cipher(f.Payload, f.Header.Mask, 0)
				}
				got <- f
			}
		}()
		for _, f := range []ws.Frame{
			ws.NewFrame(ws.OpText, false, []byte(`{"type":`)),
			ws.NewPingFrame([]byte("are you there")), // between fragments, as a control frame may be
			ws.NewFrame(ws.OpContinuation, true, []byte(`"ack","seq":1}`)),
			ws.NewTextFrame(big),
			ws.NewTextFrame(bytes.Repeat([]byte("y"), maxRunnerRead+1)),
		} {
			if err := ws.WriteFrame(conn, f); err != nil {
				break
			}
		}
		<-read
	}))
	defer srv.Close()
	ctx := context.Background()
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http")

	if _, err := dialRunner(ctx, wsURL+"/refused", nil); err == nil || !strings.Contains(err.Error(), "HTTP 429") {
		t.Fatalf("a refused handshake: %v, want one naming HTTP 429", err)
	}
	c, err := dialRunner(ctx, wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if m, err := c.Read(); err != nil || string(m) != `{"type":"ack","seq":1}` {
		t.Fatalf("the fragmented message: %q, %v", m, err)
	}
	if m, err := c.Read(); err != nil || !bytes.Equal(m, big) {
		t.Fatalf("the 70,000-byte message: %d bytes, %v", len(m), err)
	}
	if _, err := c.Read(); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a message over the bound: %v, want refused", err)
	}
	for _, p := range [][]byte{[]byte(`{"type":"message.create"}`), big} {
		if err := c.WriteText(p); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		op ws.OpCode
		p  []byte
	}{{ws.OpPong, []byte("are you there")}, {ws.OpText, []byte(`{"type":"message.create"}`)}, {ws.OpText, big}}
	for _, w := range want {
		f := <-got
		if !f.Header.Masked || !f.Header.Fin || f.Header.OpCode != w.op || !bytes.Equal(f.Payload, w.p) {
			t.Fatalf("the server read op %v fin %v masked %v, %d bytes; want op %v, %d bytes", f.Header.OpCode, f.Header.Fin, f.Header.Masked, len(f.Payload), w.op, len(w.p))
		}
	}
	c.CloseNow()
	if err := c.WriteText([]byte("late")); err == nil {
		t.Fatal("a write after CloseNow was queued")
	}
}
