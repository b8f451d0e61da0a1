package api_test

// What a large message costs: the frames that carry messages stay under
// what the SDKs accept, whatever a conversation holds, and what a message
// costs in storage stays linear in its size.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// bigText is 520 KB of text: within the limit on a message's text (512 KiB).
var bigText = strings.Repeat("0123456789", 52_000)

// large skips, under -short, a test that moves tens of MB: the race pass
// (go test -race -short) leaves them to the full run, as the detector
// makes every byte copied cost several times more, and the paths they
// take (streams, runners, the store) smaller tests take too.
func large(t *testing.T) {
	if testing.Short() {
		t.Skip("moves tens of MB: run without -short")
	}
}

// TestSnapshotStaysUnderTheFrameLimit: a conversation of 100 large
// messages, each within the limits (32 streaming, the most there may be at
// once, and 68 finished, each of 520 KB of text), gives a new subscriber an
// init of a few MiB, every large message in it summarized, which the Go SDK
// takes over SSE and WebSocket; a Fold that fetches what its snapshot
// summarized then holds all 100 messages as the server has them. One more
// streaming message is 409 busy. (Every streaming message used to be in the
// init whole: 37 MB here, over what the SDK accepts, so it reconnected for
// ever, rebuilding the snapshot each time.)
func TestSnapshotStaysUnderTheFrameLimit(t *testing.T) {
	large(t)
	t.Parallel()
	b, ctx, id := sized(t)
	alice := client.New(b.url, b.alice)
	run, err := alice.ConnectRunner(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	max := conv.DefaultLimits.MaxStreaming
	for i := range max {
		mid := fmt.Sprintf("s%02d", i)
		if _, err := run.Create(ctx, mid); err != nil {
			t.Fatal(err)
		}
		if _, err := run.Text(ctx, mid, bigText); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 - max {
		if _, err := alice.PostMessage(ctx, id, client.Message{ID: fmt.Sprintf("f%02d", i), Content: bigText}); err != nil {
			t.Fatal(err)
		}
	}

	// The init as the server sends it, read raw.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/conversations/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+b.viewer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	frame := firstSSEData(t, resp)
	resp.Body.Close()
	if len(frame) > 8<<20 {
		t.Fatalf("the init frame is %d bytes; want a few MiB at most (the SDK takes %d)", len(frame), parley.MaxFrameBytes)
	}

	viewer := client.New(b.url, b.viewer)
	server := allMessages(t, ctx, viewer, id)
	for _, tr := range []client.Transport{client.SSE, client.WebSocket} {
		st := viewer.Subscribe(ctx, id, client.SubscribeOptions{Transport: tr, OnReconnect: func(err error) { t.Errorf("%s: reconnects: %v", tr, err) }})
		fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
		f, err := st.Next(fctx)
		fcancel()
		st.Close()
		if err != nil || f.Init == nil {
			t.Fatalf("%s: no init: %v", tr, err)
		}
		if n := len(f.Init.Messages); n != 100 {
			t.Fatalf("%s: the init holds %d messages, want 100", tr, n)
		}
		for _, m := range f.Init.Messages {
			if m.Summarized == nil || m.Content != "" || len(m.Parts) != 0 || m.Summarized.Bytes < len(bigText) {
				t.Fatalf("%s: %s is in the init as %+v; want it summarized", tr, m.ID, m)
			}
		}
		var fold client.Fold
		if err := fold.Apply(f); err != nil {
			t.Fatal(err)
		}
		if err := viewer.FetchMissing(ctx, id, &fold); err != nil {
			t.Fatal(err)
		}
		got := fold.Messages()
		for i, m := range server {
			if got[i].ID != m.ID || visibleJSON(got[i]) != visibleJSON(m) {
				t.Fatalf("%s: the fold holds %s as\n%.300s\nthe server\n%.300s", tr, m.ID, visibleJSON(got[i]), visibleJSON(m))
			}
		}
	}
	// One more streaming message is refused, and writes nothing.
	before := b.lastSeq(id)
	_, err = run.Create(ctx, "one-more")
	var pe *parley.Error // the SDK's *client.StatusError wraps it
	if !errors.As(err, &pe) || pe.Code != parley.EBUSY || !strings.Contains(pe.Message, "streaming") {
		t.Fatalf("message %d of those streaming at once: %v; want busy", max+1, err)
	}
	if after := b.lastSeq(id); after != before {
		t.Fatalf("a refused create moved the log from %v to %v", before, after)
	}
}

// sized is a server with the default limits, a conversation of alice's,
// and a context long enough to write large messages.
func sized(t *testing.T) (*bundle, context.Context, string) {
	t.Helper()
	b := setup(t, engine.Options{}, api.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	b.ctx = ctx // the bundle's own requests too: on a busy machine writing 50 MB takes a while
	return b, ctx, b.conversation("alice")
}

// alicesAnswer connects alice's runner and starts her message r1; the
// runner closes when the test ends.
func alicesAnswer(t *testing.T, ctx context.Context, b *bundle, id string) *client.Runner {
	t.Helper()
	run, err := client.New(b.url, b.alice).ConnectRunner(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	if _, err := run.Create(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	return run
}

// firstSSEData reads the data of the first event of an SSE response.
func firstSSEData(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if data, ok := strings.CutPrefix(string(line), "data: "); ok {
			return []byte(strings.TrimSuffix(data, "\n"))
		}
	}
}

// allMessages lists a conversation's messages, 20 to a page.
func allMessages(t *testing.T, ctx context.Context, c *client.Client, id string) []*parley.Message {
	t.Helper()
	ms, err := c.AllMessages(ctx, id, 20)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// visibleJSON is a message as JSON without updatedSeq and updatedAt.
func visibleJSON(m *parley.Message) string {
	c := *m
	c.UpdatedSeq, c.UpdatedAt = 0, parley.Time{}
	b, _ := json.Marshal(c)
	return string(b)
}

// TestEveryFrameFitsTheSDK: the heaviest message the limits allow (its text
// and its tool calls' args all characters that JSON escapes six-fold) goes
// to subscribers that were there, that join with no position and that
// replay the log, over SSE and WebSocket, in frames the Go SDK takes; the
// tool update that would take it past the message size limit is refused
// 413 too_large on the runner socket and writes nothing. (Tool updates were
// not bounded: 40 of them made a message whose message.updated frames were
// over 32 MiB, which broke every SDK subscriber.)
func TestEveryFrameFitsTheSDK(t *testing.T) {
	large(t)
	t.Parallel()
	b, ctx, id := sized(t)
	viewer := client.New(b.url, b.viewer)
	watchers := map[string]*client.Stream{
		"sse":  viewer.Subscribe(ctx, id, client.SubscribeOptions{Transport: client.SSE}),
		"ws":   viewer.Subscribe(ctx, id, client.SubscribeOptions{Transport: client.WebSocket}),
		"log":  viewer.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}}),
		"late": nil, // joins after the message ends
	}
	for name, st := range watchers {
		if st != nil {
			if _, err := st.Next(ctx); err != nil { // init: connected
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	run := alicesAnswer(t, ctx, b, id)
	// '<' is escaped to \u003c: the text weighs six times its size in JSON,
	// twice (its part and the content), and the SDK sends each delta so.
	text := strings.Repeat("<", conv.DefaultLimits.MaxTextBytes/2-1024)
	for i := 0; i < len(text); i += 128 << 10 {
		if _, err := run.Text(ctx, "r1", text[i:min(i+128<<10, len(text))]); err != nil {
			t.Fatal(err)
		}
	}
	args := json.RawMessage(`"` + strings.Repeat("<", 128<<10) + `"`)
	// Tool calls' args count as the server stores them, escaped: 768 KiB
	// each here, so that one fits beside the text, and the next does not.
	refused, accepted := 0, 0
	for i := 0; i < 40 && refused == 0; i++ {
		before := b.lastSeq(id)
		_, err := run.Tool(ctx, "r1", client.ToolUpdate{CallID: fmt.Sprintf("c%d", i), ToolName: "fetch", Status: parley.ToolRunning, Args: args})
		switch {
		case parley.ErrorCode(err) == parley.ETOOLARGE:
			refused++
			if after := b.lastSeq(id); after != before {
				t.Fatalf("a refused tool update moved the log from %v to %v", before, after)
			}
		case err != nil:
			t.Fatal(err)
		default:
			accepted++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("tool updates of 128 KiB each: %d accepted, %d refused; want some of each (a message of 40 is over its size limit)", accepted, refused)
	}
	done, err := run.Finalize(ctx, "r1", parley.FinishEndTurn, "")
	if err != nil {
		t.Fatal(err)
	}
	watchers["late"] = viewer.Subscribe(ctx, id, client.SubscribeOptions{})
	largest, bound := 0, conv.DefaultLimits.MaxMessageJSON()
	for name, st := range watchers {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second) // a frame the SDK refuses is retried for ever
		defer rcancel()
		for {
			f, err := st.Next(rctx)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if f.Event != nil {
				raw, _ := json.Marshal(f.Event)
				largest = max(largest, len(raw))
				if len(raw) > bound {
					t.Fatalf("%s: event %d (%s) is %d bytes; a message is at most %d", name, f.Event.Seq, f.Type, len(raw), bound)
				}
			}
			if (f.Event != nil && f.Event.Seq == done) || (f.Init != nil && f.Init.Position.Seq >= done) {
				break
			}
		}
		st.Close()
	}
	t.Logf("the largest frame was %d bytes (a message is at most %d in JSON; the SDK takes %d)", largest, bound, parley.MaxFrameBytes)
	if bound >= parley.MaxFrameBytes-64<<10 {
		t.Fatalf("a message of the default limits may be %d bytes in JSON: too close to the frame limit %d", bound, parley.MaxFrameBytes)
	}
}

// TestToolUpdatesStoreWhatChanged: a message with 30 large tool calls, each
// updated three times (the runner sending the args again each time), costs
// the log about its own size, not 30 times it: each update is one
// part.updated event with what changed. (Each used to append a
// message.updated with the whole message so far.)
func TestToolUpdatesStoreWhatChanged(t *testing.T) {
	large(t)
	t.Parallel()
	b, ctx, id := sized(t)
	run := alicesAnswer(t, ctx, b, id)
	args := json.RawMessage(`{"page":"` + strings.Repeat("a", 30<<10) + `"}`)
	for i := range 30 {
		u := client.ToolUpdate{CallID: fmt.Sprintf("c%d", i), ToolName: "fetch", Args: args}
		for _, status := range []string{parley.ToolPending, parley.ToolRunning, parley.ToolCompleted} {
			u.Status = status
			if status == parley.ToolCompleted {
				u.Result = json.RawMessage(`"done"`)
			}
			if _, err := run.Tool(ctx, "r1", u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := run.Finalize(ctx, "r1", parley.FinishEndTurn, ""); err != nil {
		t.Fatal(err)
	}
	m, err := client.New(b.url, b.viewer).Message(ctx, id, "r1")
	if err != nil {
		t.Fatal(err)
	}
	size, _ := json.Marshal(m)
	logged, kinds := 0, map[string]int{}
	for after := int64(0); ; {
		evs, next, err := client.New(b.url, b.viewer).Events(ctx, id, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			logged += len(e.Data)
			kinds[e.Type]++
		}
		if next == 0 {
			break
		}
		after = next
	}
	t.Logf("a message of %d bytes: %d bytes of events %v", len(size), logged, kinds)
	if kinds[parley.EventPartUpdated] != 90 || kinds[parley.EventMessageUpdated] != 1 {
		t.Fatalf("events %v: want 90 part.updated and one message.updated (the finalize)", kinds)
	}
	if logged > 3*len(size) {
		t.Fatalf("a message of %d bytes logged %d bytes of events: want at most 3 times its size", len(size), logged)
	}
}

// TestSlowSubscriberIsBoundedInBytes: a subscriber that reads nothing while
// large messages are written is dropped once what waits for it passes the
// byte bound (1 MiB here), long before its bound in events (4096); when it
// reads again it gets the busy error frame, and may resume. (Its queue was
// bounded in events only: 4096 large events in memory per slow reader.)
func TestSlowSubscriberIsBoundedInBytes(t *testing.T) {
	large(t)
	t.Parallel()
	b := setup(t, engine.Options{SubscriberBufferBytes: 1 << 20}, api.Options{WriteTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := b.conversation("alice")
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/conversations/%s/stream HTTP/1.1\r\nHost: parley\r\nAuthorization: Bearer %s\r\n\r\n", id, b.viewer)
	alice := client.New(b.url, b.alice)
	const n = 80 // 32 MB: more than the sockets' buffers, the hand-off and the queue hold
	for range n {
		if _, err := alice.PostMessage(ctx, id, client.Message{Content: bigText[:400<<10]}); err != nil {
			t.Fatal(err)
		}
	}
	// Now read: some messages, then the error frame.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	messages, end := 0, ""
	for end == "" {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d messages: %v", messages, err)
		}
		switch {
		case line == "event: message\n":
			messages++
		case line == "event: error\n":
			data, _ := r.ReadString('\n')
			end = data
		}
		if messages == n {
			t.Fatalf("a subscriber that read nothing got all %d messages (%d MB) without being dropped", n, n*400>>10)
		}
	}
	if !strings.Contains(end, `"code":"busy"`) {
		t.Fatalf("the stream ended with %s; want busy", end)
	}
	t.Logf("dropped after %d of %d messages of 400 KiB", messages, n)
}
