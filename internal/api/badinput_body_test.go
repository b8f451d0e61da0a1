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

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/protocols"
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
	const timeout = time.Second
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
	// Each piece comes a fifth of the timeout after the last: a loaded
	// machine (the race detector on two cores) may hold the sender back
	// for most of a timeout without the import being cut off.
	const timeout = time.Second
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

	// Steady: 10 pieces, one every timeout/5, over twice the timeout.
	steady := b.raw(t, head("steady"))
	piece := len(export)/10 + 1
	for i := 0; i < len(export); i += piece {
		time.Sleep(timeout / 5)
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

// expect sends a request's head with "Expect: 100-continue" and reads the
// server's first answer: 100 when it starts reading the body (the client
// then sends it), or its final answer (its status, error code and
// Retry-After), given without reading any of it.
func (b *bundle) expect(t *testing.T, path, token, framing string) (r *rawConn, status int, code, retry string) {
	t.Helper()
	r = b.raw(t, "POST "+path+" HTTP/1.1\nHost: "+strings.TrimPrefix(b.url, "http://")+"\nAuthorization: Bearer "+token+
		"\nContent-Type: application/json\nExpect: 100-continue\n"+framing)
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		t.Fatalf("POST %s: no answer: %v", path, err)
	}
	if resp.StatusCode != 100 {
		code = errorCode(resp)
		resp.Body.Close()
	}
	return r, resp.StatusCode, code, resp.Header.Get("Retry-After")
}

// final reads the final answer to a request whose body was sent after a
// 100 Continue.
func (r *rawConn) final() (int, string) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, errorCode(resp)
}

// paddedChat is a chat body of exactly n bytes whose last message is the
// assistant's (refused once decoded: 422).
func paddedChat(n int) []byte {
	head, tail := `{"id":"padded","messages":[{"id":"m1","role":"assistant","parts":[{"type":"text","text":"`, `"}]}]}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// TestBodiesAreReservedBeforeReading: a request body is read only once the
// server's budget of bodies in flight (MaxBodyMemory) has room for it, and
// only after the caller's bounds: forty chat bodies of 16 MiB at once,
// with room for two, are two read and thirty-eight answered 503
// unavailable with Retry-After, none of theirs read (the client, which
// waits for 100 Continue, never sends it); the room comes back once a
// body is decoded, and an import holds the most it reads at once for as
// long as it runs. A chat past its token's connections is 429 before its
// body is read, and a body that says it is over the bound is 413 before.
// Before, every body was read whole first: forty of 16 MiB took 515 MB.
func TestBodiesAreReservedBeforeReading(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxBodyMemory: 40 << 20, MaxConnsPerToken: 45}})
	size := protocols.MaxChatBodyBytes
	cl := fmt.Sprintf("Content-Length: %d\n", size)
	var read []*rawConn
	refused := 0
	for i := range 40 {
		r, status, code, retry := b.expect(t, "/v1/chat", b.alice, cl)
		switch {
		case status == 100:
			read = append(read, r)
		case status == 503 && code == "unavailable" && retry == "1":
			refused++
		default:
			t.Fatalf("chat body %d: %d %s (Retry-After %q), want 100 Continue or 503 unavailable with Retry-After 1", i, status, code, retry)
		}
	}
	if len(read) != 2 || refused != 38 {
		t.Fatalf("40 bodies of 16 MiB, room for 40 MiB: %d read, %d refused; want 2 and 38", len(read), refused)
	}
	for _, r := range read {
		if _, err := r.c.Write(paddedChat(size)); err != nil {
			t.Fatal(err)
		}
		if status, code := r.final(); status != 422 || code != "invalid_value" {
			t.Fatalf("a body read whole: %d %s, want 422 invalid_value (decoded)", status, code)
		}
	}
	if _, status, _, _ := b.expect(t, "/v1/chat", b.alice, cl); status != 100 {
		t.Fatalf("once the bodies were decoded: %d, want 100 Continue (room again)", status)
	}

	// An import of unknown length holds 16 MiB for as long as it runs:
	// with it and the chat above (16 MiB), 8 of the 40 MiB are left.
	id := b.conversation("alice", "bob")
	export := b.do("GET", "/v1/conversations/"+id+"/export?format=jsonl", b.viewer, nil).raw
	imp, status, _, _ := b.expect(t, "/v1/conversations/import?id=imported", b.admin, "Transfer-Encoding: chunked\n")
	if status != 100 {
		t.Fatalf("an import: %d, want 100 Continue", status)
	}
	if _, status, code, _ := b.expect(t, "/v1/chat", b.bob, fmt.Sprintf("Content-Length: %d\n", 10<<20)); status != 503 || code != "unavailable" {
		t.Fatalf("a chat body of 10 MiB with 8 MiB left: %d %s, want 503 unavailable", status, code)
	}
	fmt.Fprintf(imp.c, "%x\r\n%s\r\n0\r\n\r\n", len(export), export)
	if status, _ := imp.final(); status != 201 {
		t.Fatalf("the import: %d", status)
	}
	if _, status, _, _ := b.expect(t, "/v1/chat", b.bob, fmt.Sprintf("Content-Length: %d\n", 10<<20)); status != 100 {
		t.Fatalf("a chat body of 10 MiB once the import ended: %d, want 100 Continue", status)
	}

	// Bounds of the caller come before the body.
	if _, status, code, _ := b.expect(t, "/v1/chat", b.bob, fmt.Sprintf("Content-Length: %d\n", size+1)); status != 413 || code != "too_large" {
		t.Fatalf("a body that says it is over 16 MiB: %d %s, want 413 too_large before it is read", status, code)
	}
	// A runner's frame over 64 KiB takes room from the same budget: with
	// a chat body's 16 MiB reserved, 512 KiB are left.
	full := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxBodyMemory: 16<<20 + 512<<10}})
	if _, status, _, _ := full.expect(t, "/v1/chat", full.alice, cl); status != 100 {
		t.Fatalf("a chat body: %d, want 100 Continue", status)
	}
	fid := full.conversation("alice", "bob")
	runner := full.runnerConn(fid, full.alice)
	frame := func(pad int) []byte {
		return fmt.Appendf(nil, `{"type":"message.create","turnId":"r1","metadata":{"pad":%q}}`, strings.Repeat("x", pad))
	}
	send(t, full, runner, string(frame(100<<10))) // answered: there is room for 100 KiB
	if err := runner.Write(full.ctx, websocket.MessageText, frame(800<<10)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runner.Read(full.ctx); websocket.CloseStatus(err) != 1013 {
		t.Fatalf("a runner's 800 KiB frame with 512 KiB of room: %v, want the connection closed with 1013 (try again later)", err)
	}

	limited := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 1}})
	lid := limited.conversation("alice", "bob")
	if _, sse := limited.openSSE(lid, "", "Authorization", "Bearer "+limited.alice); sse.StatusCode != 200 {
		t.Fatalf("alice's stream: %d", sse.StatusCode)
	}
	for _, path := range []string{"/v1/chat", "/v1/ag-ui"} {
		if _, status, code, _ := limited.expect(t, path, limited.alice, cl); status != 429 || code != "rate_limited" {
			t.Fatalf("%s past the token's connections: %d %s, want 429 rate_limited before the body is read", path, status, code)
		}
	}
}
