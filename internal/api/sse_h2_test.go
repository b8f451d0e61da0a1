package api_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// h2Stream serves the API over HTTP/2 (TLS) with the given heartbeat, on
// which alice's token may hold one connection, and returns the bundle,
// the conversation, and a function that opens its SSE stream as alice.
func h2Stream(t *testing.T, heartbeat time.Duration) (*bundle, string, func(context.Context) (*http.Response, error)) {
	t.Helper()
	b, handler := setupServer(t, engine.Options{}, api.Options{HeartbeatInterval: heartbeat, Guards: api.Guards{MaxConnsPerToken: 1}})
	id := b.conversation("alice", "bob")
	h2 := httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	client := h2.Client()
	return b, id, func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", h2.URL+"/v1/conversations/"+id+"/stream", nil)
		req.Header.Set("Authorization", "Bearer "+b.alice)
		return client.Do(req)
	}
}

// sseLines reads a stream's lines in the background; want waits for a
// line that begins with prefix.
func sseLines(t *testing.T, resp *http.Response) (want func(prefix string)) {
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return func(prefix string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q on the stream", prefix)
			}
		}
	}
}

// TestSSEOverHTTP2: where the connection cannot be taken over (HTTP/2),
// the handler serves the stream itself: the init, what is published, and
// a heartbeat's ping while it is quiet. The client's leaving ends the
// stream and gives the token's connection back at once: with an hour's
// heartbeat, a departure noticed only at the next one would time the test
// out.
func TestSSEOverHTTP2(t *testing.T) {
	t.Parallel()
	b, id, open := h2Stream(t, 50*time.Millisecond)
	resp, err := open(b.ctx)
	if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("the stream over HTTP/2: %v %v", resp, err)
	}
	defer resp.Body.Close()
	want := sseLines(t, resp)
	want("event: init")
	want(": ping")
	b.post(id, b.bob, "over two", "turn")
	want("event: message")

	b, _, open = h2Stream(t, time.Hour)
	ctx, cancel := context.WithCancel(b.ctx)
	resp, err = open(ctx)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the stream over HTTP/2: %v %v", resp, err)
	}
	sseLines(t, resp)("event: init")
	cancel() // the client leaves
	resp.Body.Close()
	for {
		resp, err := open(b.ctx) // fails the test once b.ctx ends
		if err != nil {
			t.Fatalf("the token's connection was not given back after the client left: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
