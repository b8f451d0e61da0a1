package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
)

// rawConn is a client that writes a request by hand over TCP, so that it
// can send its body as slowly as it likes, or not at all.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (b *bundle) raw(t *testing.T, head string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// trickle sends one byte of body every interval until the server closes
// the connection or answers, and returns how long that took; it gives up
// (and fails the test) after limit.
func (r *rawConn) trickle(interval, limit time.Duration) time.Duration {
	r.t.Helper()
	start := time.Now()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = r.br.Peek(1) // an answer, or the close
	}()
	for {
		select {
		case <-answered:
			return time.Since(start)
		case <-time.After(interval):
		}
		if time.Since(start) > limit {
			r.t.Fatalf("still sending a body %s after it started", limit)
		}
		if _, err := r.c.Write([]byte("x")); err != nil {
			return time.Since(start)
		}
	}
}

// answer reads the response within limit, and then expects the server to
// close the connection.
func (r *rawConn) answer(limit time.Duration) (int, string) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("no answer within %s: %v", limit, err)
	}
	code := errorCode(resp)
	resp.Body.Close()
	// Closed: an orderly end, or a reset when the server closed with the
	// unread body still in its socket buffer (TCP then sends RST).
	if _, err := r.br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("after the answer: %v, want the connection closed", err)
	}
	return resp.StatusCode, code
}

// TestSlowBodiesAreCutOff: a request body must arrive within the body
// timeout: one trickled a byte at a time is cut off by then and writes
// nothing. A request refused for its token (none, or a bad one) is
// answered at once, without its body being read or drained, and its
// connection closed: neither a stalled body nor a huge one holds it.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{BodyTimeout: timeout}})
	id := b.conversation("alice", "bob")
	host := strings.TrimPrefix(b.url, "http://")
	before := b.snapshot()

	post := "POST /v1/conversations/" + id + "/messages HTTP/1.1\nHost: " + host + "\nContent-Type: application/json\n"
	for _, framing := range []string{"Content-Length: 100000\n", "Transfer-Encoding: chunked\n"} {
		r := b.raw(t, post+"Authorization: Bearer "+b.alice+"\n"+framing)
		if took := r.trickle(50*time.Millisecond, 10*timeout); took < timeout*8/10 {
			t.Fatalf("%s: cut off after %s, before the body timeout", framing, took)
		}
	}
	for _, c := range []struct{ name, head, body string }{
		{"no token, stalled chunked body", "Transfer-Encoding: chunked\n", "5\r\n{\"con\r\n"},
		{"no token, stalled body", "Content-Length: 1000\n", `{"content":`},
		{"no token, huge body", "Content-Length: 10000000000\n", strings.Repeat("x", 64<<10)},
		{"bad token, stalled chunked body", "Authorization: Bearer pk_nope\nTransfer-Encoding: chunked\n", "5\r\n{\"con\r\n"},
		{"malformed Authorization, stalled body", "Authorization: Basic eDp5\nContent-Length: 1000\n", "{"},
	} {
		r := b.raw(t, post+c.head)
		if _, err := io.WriteString(r.c, c.body); err != nil {
			t.Fatal(err)
		}
		// Well within the body timeout: the answer does not wait for the body.
		if status, code := r.answer(timeout / 2); status != 401 || code != "unauthorized" {
			t.Errorf("%s: %d %q, want 401 unauthorized", c.name, status, code)
		}
	}
	if after := b.snapshot(); after != before {
		t.Fatalf("a cut-off body wrote something:\nbefore %s\nafter  %s", before, after)
	}
}

// TestSlowImportKeepsGoing: an import may take longer than the body
// timeout as long as its data keeps coming; one that stops for longer is
// cut off, and leaves nothing.
func TestSlowImportKeepsGoing(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{BodyTimeout: timeout}})
	id := b.conversation("alice", "bob")
	for i := range 8 {
		b.post(id, b.alice, fmt.Sprint("line ", i), "none")
	}
	r := b.do("GET", "/v1/conversations/"+id+"/export?format=jsonl", b.viewer, nil)
	b.want(r, 200, "")
	export := r.raw
	host := strings.TrimPrefix(b.url, "http://")
	head := func(to string) string {
		return fmt.Sprintf("POST /v1/conversations/import?id=%s HTTP/1.1\nHost: %s\nAuthorization: Bearer %s\nContent-Type: application/json\nContent-Length: %d\n", to, host, b.admin, len(export))
	}

	// Steady: 10 pieces, one every timeout/3, over three times the timeout.
	steady := b.raw(t, head("steady"))
	piece := len(export)/10 + 1
	for i := 0; i < len(export); i += piece {
		time.Sleep(timeout / 3)
		if _, err := steady.c.Write(export[i:min(i+piece, len(export))]); err != nil {
			t.Fatalf("the steady import was cut off after %d bytes: %v", i, err)
		}
	}
	_ = steady.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(steady.br, nil)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("steady import: %v %v", resp, err)
	}
	resp.Body.Close()

	// Stalled: half the export, then nothing.
	stalled := b.raw(t, head("stalled"))
	if _, err := stalled.c.Write(export[:len(export)/2]); err != nil {
		t.Fatal(err)
	}
	if took := stalled.trickle(10*timeout, 5*timeout); took < timeout*8/10 {
		t.Fatalf("a stalled import was cut off after %s, before the timeout", took)
	}
	b.want(b.do("GET", "/v1/conversations/steady", b.viewer, nil), 200, "")
	b.want(b.do("GET", "/v1/conversations/stalled", b.viewer, nil), 404, "not_found")
}
