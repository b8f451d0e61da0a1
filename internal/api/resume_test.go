package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// postAsync writes n messages as alice from another goroutine and reports
// the first failure (or nil) on the returned channel.
func (b *bundle) postAsync(id string, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			body, _ := json.Marshal(map[string]any{"content": fmt.Sprint("live ", i)})
			req, _ := http.NewRequestWithContext(b.ctx, "POST", b.url+"/v1/conversations/"+id+"/messages", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+b.alice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 201 {
				done <- fmt.Errorf("live write %d: status %d", i, resp.StatusCode)
				return
			}
		}
		done <- nil
	}()
	return done
}

// TestSSEResumeIsExactWhileWritersWrite: a subscriber resuming from the
// middle of the log, while another agent keeps writing, gets every event
// after its position exactly once and in order: the missed ones, then live.
func TestSSEResumeIsExactWhileWritersWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	for i := 0; i < 10; i++ {
		b.post(id, b.alice, fmt.Sprint(i), "none") // seqs 2..11
	}
	epoch := b.do("GET", "/v1/conversations/"+id, b.viewer, nil).body["head"].(map[string]any)["epoch"].(string)
	const live = 30
	done := b.postAsync(id, live)
	next, _ := b.openSSE(id, "", "Last-Event-ID", epoch+":5")
	if in := next(); in.event != "init" || in.data["recovered"] != true || in.id != epoch+":5" {
		t.Fatalf("init = %+v", in)
	}
	want := int64(6)
	for want <= 11+live {
		ev := next()
		if ev.event == "guidance" {
			if ev.id != "" || ev.data["seq"] != nil {
				t.Fatalf("guidance with a position: %+v", ev)
			}
			continue
		}
		if got := int64(ev.data["seq"].(float64)); got != want || ev.id != fmt.Sprintf("%s:%d", epoch, want) || ev.event != "message" {
			t.Fatalf("got event %s seq %d (id %q), want seq %d", ev.event, got, ev.id, want)
		}
		want++
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.post(id, b.alice, "last", "turn") // surely live
	for {
		ev := next()
		if ev.event == "guidance" {
			continue
		}
		if ev.data["seq"] != float64(12+live) {
			t.Fatalf("live event after resume: %+v", ev)
		}
		break
	}

	// ?after without an epoch resumes in the current epoch, and says which.
	next2, _ := b.openSSE(id, fmt.Sprintf("?after=%d", 11+live))
	in := next2()
	if in.id != fmt.Sprintf("%s:%d", epoch, 11+live) || in.data["position"].(map[string]any)["epoch"] != epoch {
		t.Fatalf("init without epoch = %+v", in)
	}
	if ev := next2(); ev.id != fmt.Sprintf("%s:%d", epoch, 12+live) {
		t.Fatalf("event id %q", ev.id)
	}
}

func TestSSEGuidanceAndHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{HeartbeatInterval: 30 * time.Millisecond})
	id := b.conversation("alice", "bob")
	next, _ := b.openSSE(id, "")
	in := next()
	if g := in.data["guidance"].(map[string]any); g["kind"] != "start_turn" || g["nextAgentId"] != "alice" || g["turn"] != 1.0 {
		t.Fatalf("init guidance = %v", g)
	}
	b.post(id, b.alice, "thinking", "none")
	if ev := next(); ev.data["seq"] != 2.0 {
		t.Fatalf("event = %+v", ev)
	}
	g := next()
	if g.event != "guidance" || g.data["type"] != "guidance" || g.data["agentId"] != "alice" || g.data["conversationId"] != id ||
		g.data["data"].(map[string]any)["kind"] != "continue_turn" || g.data["turn"] != 1.0 || g.data["afterSeq"] != 2.0 {
		t.Fatalf("guidance while alice's turn is open = %+v", g)
	}
	b.post(id, b.alice, "done", "turn")
	if ev := next(); ev.data["seq"] != 3.0 || ev.data["finality"] != "turn" {
		t.Fatalf("event = %+v", ev)
	}
	g = next()
	if d := g.data["data"].(map[string]any); g.event != "guidance" || d["kind"] != "start_turn" || d["nextAgentId"] != "bob" || d["turn"] != 2.0 || g.data["afterSeq"] != 3.0 {
		t.Fatalf("guidance after alice closed = %+v", g)
	}

	// Idle streams get comment pings.
	req, _ := http.NewRequestWithContext(b.ctx, "GET", b.url+"/v1/conversations/"+id+"/stream?token="+b.viewer, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for pings := 0; pings < 2; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": ping\n" {
			pings++
		}
	}
}

// TestStreamsEndOnShutdown: when the engine closes, SSE and WebSocket
// subscribers get an error frame saying so, then the end of the stream
// (1013 on WebSocket), and can resume elsewhere. The engine closes right
// after the streams' first frames, many times over: a close that came as
// a stream's first frame was finished being written once cut the stream
// without its error frame (the end was taken for the shedding of a
// stream whose first frame is not read, and poisoned the writer), in
// about two runs of five.
func TestStreamsEndOnShutdown(t *testing.T) {
	t.Parallel()
	for range 20 {
		streamsEndOnShutdown(t)
	}
}

func streamsEndOnShutdown(t *testing.T) {
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	next, _ := b.openSSE(id, "")
	next() // init
	ws := b.dialWS(id, "")
	readFrame(t, b.ctx, ws) // init
	b.eng.Close()

	ev := next()
	if e := ev.data["error"].(map[string]any); ev.event != "error" || ev.id != "" || e["code"] != "unavailable" || e["message"] == "" {
		t.Fatalf("SSE end = %+v", ev)
	}
	f := readFrame(t, b.ctx, ws)
	if f["type"] != "error" || f["error"].(map[string]any)["code"] != "unavailable" {
		t.Fatalf("WS end frame = %v", f)
	}
	_, _, err := ws.Read(b.ctx)
	if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Fatalf("WS closed with %v, want 1013", err)
	}
}

func TestWebSocketSnapshotAuthAndOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{OriginPatterns: []string{"app.example"}})
	id := b.conversation("alice", "bob")
	b.post(id, b.alice, "one", "turn") // seq 2
	b.post(id, b.bob, "two", "none")   // seq 3

	// Another epoch: a snapshot, recovered false, continuing after the head.
	epoch := b.do("GET", "/v1/conversations/"+id, b.viewer, nil).body["head"].(map[string]any)["epoch"].(string)
	c := b.dialWS(id, "?after=1&epoch="+staleEpoch(epoch))
	in := readFrame(t, b.ctx, c)
	if in["type"] != "init" || in["recovered"] != false || in["position"].(map[string]any)["seq"] != 3.0 || len(in["messages"].([]any)) != 2 {
		t.Fatalf("init = %v", in)
	}
	if g := in["guidance"].(map[string]any); g["kind"] != "continue_turn" || g["nextAgentId"] != "bob" {
		t.Fatalf("init guidance = %v", g)
	}
	b.post(id, b.bob, "three", "turn") // seq 4
	if f := readFrame(t, b.ctx, c); f["seq"] != 4.0 {
		t.Fatalf("frame = %v", f)
	}
	if f := readFrame(t, b.ctx, c); f["type"] != "guidance" || f["data"].(map[string]any)["kind"] != "start_turn" || f["agentId"] != "alice" || f["turn"] != 3.0 {
		t.Fatalf("guidance = %v", f)
	}
	// Client frames are read and ignored.
	if err := c.Write(b.ctx, websocket.MessageText, []byte(`{"hello":1}`)); err != nil {
		t.Fatal(err)
	}
	b.post(id, b.alice, "four", "none") // seq 5
	if f := readFrame(t, b.ctx, c); f["seq"] != 5.0 {
		t.Fatalf("frame after a client frame = %v", f)
	}
	c.Close(websocket.StatusNormalClosure, "")

	url := wsURL(b, id, "")
	dial := func(query string, h http.Header) (int, error) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, url+query, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			c.CloseNow()
			return 101, nil
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, err
	}
	if st, _ := dial("", nil); st != 401 {
		t.Fatalf("no token: %d", st)
	}
	if st, _ := dial("?after=x&token="+b.viewer, nil); st != 400 {
		t.Fatalf("bad after: %d", st)
	}
	if st, err := dial("?token="+b.viewer, nil); st != 101 {
		t.Fatalf("?token=: %d %v", st, err)
	}
	if st, _ := dial("?token="+b.viewer, http.Header{"Origin": {"https://evil.example"}}); st != 403 {
		t.Fatalf("foreign origin: %d", st)
	}
	if st, err := dial("?token="+b.viewer, http.Header{"Origin": {"https://app.example"}}); st != 101 {
		t.Fatalf("allowed origin: %d %v", st, err)
	}
	if !strings.HasPrefix(url, "ws://127.0.0.1") {
		t.Fatalf("url %s", url)
	}
}
