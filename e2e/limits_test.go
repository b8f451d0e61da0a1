package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestSlowClientsAreCutOff: parley serve closes a connection that sends no
// request, or its headers too slowly, within -header-timeout; one that
// trickles a body within -body-timeout; and refuses headers over 64 KiB
// with 431.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	admin, _ := createToken(t, db, "-kind", "admin")
	srv := startServer(t, db, "-header-timeout", "1s", "-body-timeout", "1s")
	addr := strings.TrimPrefix(srv.url, "http://")
	const bound = 3 * time.Second // each timeout is 1 s

	// closedWithin sends what, then waits for the server to close the
	// connection (after an answer, if it gives one) for at most bound.
	closedWithin := func(name, what string, trickle bool) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, what); err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_, _ = io.Copy(io.Discard, c)
		}()
		start := time.Now()
		for {
			select {
			case <-closed:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if time.Since(start) > bound {
				t.Fatalf("%s: the connection is still open after %s", name, bound)
			}
			if trickle {
				_, _ = c.Write([]byte("x"))
			}
		}
	}
	closedWithin("nothing sent", "", false)
	closedWithin("half the headers", "POST /v1/conversations HTTP/1.1\r\nHost: "+addr+"\r\n", false)
	closedWithin("headers a byte at a time", "POST /v1/conversations HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: ", true)
	closedWithin("a trickled body", "POST /v1/conversations HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+admin+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", true)

	req, _ := http.NewRequest("GET", srv.url+"/v1/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _ = req.Write(c) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// TestIdleConnectionsCannotExhaustTheServer: parley serve, allowed 400
// open files (as `ulimit -n 400` leaves it), keeps answering while a
// client opens 1,000 connections on which it sends nothing, or half of a
// request's headers. Before, each took a descriptor until none was left:
// accept failed (too many open files) and the server answered nobody. Now
// the oldest idle connections of that address are closed to make room,
// and an authenticated client's kept-alive connection and its stream stay
// open: /healthz and authenticated requests are answered, on new
// connections and on the kept one.
func TestIdleConnectionsCannotExhaustTheServer(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	admin, _ := createToken(t, db, "-kind", "admin")
	// sh's ulimit sets the hard limit too: Go cannot raise it back.
	srv := startCommand(t, exec.Command("sh", "-c", `ulimit -n 400 && exec "$0" "$@"`, binary, "serve", "-db", db, "-addr", "127.0.0.1:0"))
	addr := strings.TrimPrefix(srv.url, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// An authenticated client: a kept-alive connection, and a stream.
	kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 20 * time.Second}
	authed := func(c *http.Client, method, path, body string) (*http.Response, bool) {
		t.Helper()
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, srv.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp, reused
	}
	resp, _ := authed(kept, "POST", "/v1/conversations", `{"participants":["alice"]}`)
	var made struct{ Conversation struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&made); err != nil || resp.StatusCode != 201 {
		t.Fatalf("creating a conversation: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	id := made.Conversation.ID
	stream, _ := authed(&http.Client{}, "GET", "/v1/conversations/"+id+"/stream", "")
	defer stream.Body.Close()
	events := bufio.NewReader(stream.Body)
	awaitEvent := func(name string) {
		t.Helper()
		for {
			line, err := events.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended before its %s event: %v", name, err)
			}
			if line == "event: "+name+"\n" {
				return
			}
		}
	}
	awaitEvent("init")

	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := range 1000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		flood = append(flood, c)
		if i%2 == 1 {
			_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n")
		}
	}

	health, err := (&http.Client{Timeout: 20 * time.Second}).Get(srv.url + "/healthz")
	if err != nil {
		t.Fatalf("/healthz past the flood: %v\n%s", err, srv.log())
	}
	health.Body.Close()
	if health.StatusCode != 200 {
		t.Fatalf("/healthz past the flood: %d", health.StatusCode)
	}
	fresh := &http.Client{Timeout: 20 * time.Second}
	if resp, _ := authed(fresh, "GET", "/v1/conversations", ""); resp.StatusCode != 200 {
		t.Fatalf("an authenticated request on a new connection: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	resp, reused := authed(kept, "POST", "/v1/conversations/"+id+"/messages", `{"agentId":"alice","content":"still here"}`)
	resp.Body.Close()
	if resp.StatusCode != 201 || !reused {
		t.Fatalf("the authenticated client's kept-alive connection: %d, reused %v (want 201 on the same connection)", resp.StatusCode, reused)
	}
	awaitEvent("message") // the stream is still open
	if log := srv.log(); strings.Contains(log, "too many open files") {
		t.Fatalf("the server ran out of descriptors:\n%s", log)
	}
}

// TestLargeBodiesWaitForRoom: parley serve -max-body-memory 32 MiB reads
// at most two 16 MiB chat bodies at once. Forty clients that each post one
// at once (the largest a chat takes) leave the server's memory well under
// what reading them all takes (before: 515 MB); forty that ask first
// (Expect: 100-continue) are two told to send it and thirty-eight answered
// 503 unavailable with Retry-After, without the server reading theirs.
func TestLargeBodiesWaitForRoom(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	alice, _ := createToken(t, db, "-kind", "agent", "-agent", "alice")
	srv := startServer(t, db, "-max-body-memory", strconv.Itoa(32<<20))
	pid := srv.cmd.Process.Pid
	// A long chat of 16 MiB, the most a chat body may be.
	body := largeChat(16 << 20)

	before := rss(t, pid, "VmHWM")
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", srv.url+"/v1/chat", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+alice)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil { // a refused body may also be cut off
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if grew := rss(t, pid, "VmHWM") - before; !raceBuild && grew > 256<<20 {
		t.Fatalf("forty 16 MiB bodies at once took the server %d MiB more at its peak; two at a time take well under 256", grew>>20)
	}

	addr := strings.TrimPrefix(srv.url, "http://")
	continued, refused := 0, 0
	for i := range 40 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/chat HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", addr, alice, len(body))
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("body %d: no answer: %v", i, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == 100:
			continued++ // told to send it: not sent
		case resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "1" && strings.Contains(string(raw), `"code":"unavailable"`):
			refused++
		default:
			t.Fatalf("body %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	if continued != 2 || refused != 38 {
		t.Fatalf("forty 16 MiB bodies with room for 32 MiB: %d read, %d refused unread; want 2 and 38", continued, refused)
	}
	if status(t, srv.url+"/healthz", "") != 200 {
		t.Fatal("the server does not answer")
	}
}

// TestRunnerConnectStormIsHeldBack: parley serve -runner-connect-rate 1
// -runner-connect-burst 5 lets an agent's token connect its agent-wide
// runner five times at once and then once a second: fifty connects in a
// row, of an agent that takes part in no conversation, are five let in and
// forty-five refused with 429 rate_limited and Retry-After before the
// handshake (before, each was let in, and each looked at every
// conversation the server held).
func TestRunnerConnectStormIsHeldBack(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	ghost, _ := createToken(t, db, "-kind", "agent", "-agent", "ghost")
	srv := startServer(t, db, "-runner-connect-rate", "1", "-runner-connect-burst", "5")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.url, "http") + "/v1/agents/ghost/runner"
	opts := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ghost}}}
	in, limited := 0, 0
	start := time.Now()
	for i := range 50 {
		c, resp, err := websocket.Dial(ctx, url, opts)
		switch {
		case err == nil:
			in++
			c.CloseNow()
		case resp != nil && resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "":
			limited++
		default:
			t.Fatalf("connect %d: %v %v", i, resp, err)
		}
	}
	// On a loaded machine seconds may pass meanwhile: one more each.
	if most := 5 + int(time.Since(start).Seconds()) + 1; in < 5 || in > most || in+limited != 50 {
		t.Fatalf("50 connects at once, 5 allowed at once and 1 a second: %d let in (at most %d), %d refused", in, most, limited)
	}
}
