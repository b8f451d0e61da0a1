package api_test

import (
	"bufio"
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
	"github.com/prometheus/client_golang/prometheus"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id, event string
	data      map[string]any
}

// openSSE connects to a conversation's SSE stream and returns a function
// that reads the next event.
func (b *bundle) openSSE(id, query string, header ...string) (func() sseEvent, *http.Response) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	b.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/v1/conversations/"+id+"/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+b.viewer)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { resp.Body.Close() })
	next := sseFrames(bufio.NewReader(resp.Body))
	return func() sseEvent {
		b.t.Helper()
		ev, err := next()
		if err != nil {
			b.t.Fatalf("SSE read: %v", err)
		}
		return ev
	}, resp
}

// sseFrames reads Server-Sent Events from rd, without a testing.T, for
// readers that run in their own goroutine.
func sseFrames(rd *bufio.Reader) func() (sseEvent, error) {
	return func() (sseEvent, error) {
		var ev sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return ev, err
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "" && ev.data != nil:
				return ev, nil
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
					return ev, err
				}
			}
		}
	}
}

func (b *bundle) post(id, token, content string, fin string) {
	b.t.Helper()
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", token, map[string]any{"content": content, "finality": fin}), 201, "")
}

func TestSSEResumesFromLastEventID(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	b.post(id, b.alice, "one", "turn") // seq 2
	b.post(id, b.bob, "two", "turn")   // seq 3

	next, resp := b.openSSE(id, "")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	init := next()
	epoch := init.data["position"].(map[string]any)["epoch"].(string)
	if init.event != "init" || init.data["recovered"] != false || init.id != epoch+":3" || len(init.data["messages"].([]any)) != 2 {
		t.Fatalf("init = %+v", init)
	}
	if g := init.data["guidance"].(map[string]any); g["nextAgentId"] != "alice" || g["turn"] != 3.0 {
		t.Fatalf("init guidance = %v", g)
	}
	b.post(id, b.alice, "three", "none") // seq 4, turn 3 open
	ev := next()
	if ev.event != "message" || ev.id != epoch+":4" || ev.data["seq"] != 4.0 || ev.data["data"].(map[string]any)["content"] != "three" {
		t.Fatalf("live event = %+v", ev)
	}
	g := next()
	if g.event != "guidance" || g.id != "" || g.data["afterSeq"] != 4.0 || g.data["data"].(map[string]any)["kind"] != "continue_turn" {
		t.Fatalf("guidance = %+v", g)
	}

	// Reconnect as EventSource does, with the last id: only what was missed.
	b.post(id, b.alice, "four", "turn") // seq 5, missed
	next2, _ := b.openSSE(id, "", "Last-Event-ID", epoch+":4")
	if in := next2(); in.data["recovered"] != true || in.id != epoch+":4" || in.data["messages"] != nil {
		t.Fatalf("resumed init = %+v", in)
	}
	if ev := next2(); ev.data["seq"] != 5.0 {
		t.Fatalf("first resumed event seq %v, want 5", ev.data["seq"])
	}
	b.post(id, b.bob, "five", "turn") // seq 6, live
	for {
		ev := next2()
		if ev.event == "guidance" {
			continue
		}
		if ev.data["seq"] != 6.0 {
			t.Fatalf("live after resume: seq %v, want 6", ev.data["seq"])
		}
		break
	}

	// Query parameters resume too; another epoch gets a snapshot.
	next3, _ := b.openSSE(id, "?after=5&epoch="+epoch)
	if in := next3(); in.data["recovered"] != true {
		t.Fatalf("?after resume = %+v", in)
	}
	if ev := next3(); ev.data["seq"] != 6.0 {
		t.Fatalf("?after=5 first event %v", ev.data["seq"])
	}
	next4, _ := b.openSSE(id, "?after=2&epoch="+staleEpoch(epoch))
	if in := next4(); in.data["recovered"] != false || in.data["position"].(map[string]any)["seq"] != 6.0 {
		t.Fatalf("stale epoch init = %+v", in)
	}
	b.want(b.do("GET", "/v1/conversations/"+id+"/stream?after=x", b.viewer, nil), 400, "invalid_request")
	r := b.do("GET", "/v1/conversations/"+id+"/stream", b.viewer, nil, "Last-Event-ID", "garbage")
	b.want(r, 400, "invalid_request")
	b.want(b.do("GET", "/v1/conversations/nope/stream", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/"+id+"/stream", "", nil), 401, "unauthorized")
}

func wsURL(b *bundle, id, query string) string {
	return "ws" + strings.TrimPrefix(b.url, "http") + "/v1/conversations/" + id + "/ws" + query
}

func (b *bundle) dialWS(id, query string) *websocket.Conn {
	b.t.Helper()
	h := http.Header{"Authorization": {"Bearer " + b.viewer}}
	c, _, err := websocket.Dial(b.ctx, wsURL(b, id, query), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		b.t.Fatal(err)
	}
	c.SetReadLimit(16 << 20)
	b.t.Cleanup(func() { c.CloseNow() })
	return c
}

func readFrame(t testing.TB, ctx context.Context, c *websocket.Conn) map[string]any {
	t.Helper()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("ws read: %v", err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestWebSocketStreamAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	for i := 0; i < 5; i++ {
		b.post(id, b.alice, fmt.Sprint(i), "none") // seqs 2..6 in turn 1
	}
	c := b.dialWS(id, "?after=3")
	init := readFrame(t, b.ctx, c)
	if init["type"] != "init" || init["recovered"] != true {
		t.Fatalf("init = %v", init)
	}
	for want := 4.0; want <= 6; want++ {
		if f := readFrame(t, b.ctx, c); f["seq"] != want || f["type"] != "message" {
			t.Fatalf("frame = %v, want seq %v", f, want)
		}
	}
	b.post(id, b.alice, "done", "turn")
	if f := readFrame(t, b.ctx, c); f["seq"] != 7.0 || f["finality"] != "turn" {
		t.Fatalf("live frame = %v", f)
	}
	if f := readFrame(t, b.ctx, c); f["type"] != "guidance" || f["agentId"] != "bob" || f["turn"] != 2.0 || f["seq"] != nil {
		t.Fatalf("guidance frame = %v", f)
	}
	c.Close(websocket.StatusNormalClosure, "")

	// Unknown conversations are refused before the upgrade.
	h := http.Header{"Authorization": {"Bearer " + b.viewer}}
	_, resp, err := websocket.Dial(b.ctx, wsURL(b, "nope", ""), &websocket.DialOptions{HTTPHeader: h})
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Fatalf("dial unknown conversation: %v %v", err, resp)
	}
}

// TestSlowWebSocketSubscriberIsDropped: a client that never reads is cut off
// with an error frame once its buffer fills, while a reading subscriber and
// the writer carry on; the slow one can then resume from its last position.
func TestSlowWebSocketSubscriberIsDropped(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, engine.Options{SubscriberBuffer: 32, Metrics: engine.NewMetrics(reg)}, api.Options{WriteTimeout: time.Minute, Gatherer: reg})
	id := b.conversation()
	slow := b.dialWS(id, "")
	fast := b.dialWS(id, "")
	readFrame(t, b.ctx, fast) // init
	dropped := func() bool {
		r := b.do("GET", "/metrics", "", nil)
		return strings.Contains(string(r.raw), "parley_slow_subscriber_disconnects_total 1")
	}
	// Write until the slow one is dropped: its socket buffers fill, then its
	// queue. The fast one reads every event as it comes.
	big := strings.Repeat("x", 32<<10)
	var seq float64
	for i := 0; !dropped(); i++ {
		if i == 2000 {
			t.Fatal("the slow subscriber was never dropped")
		}
		for j := 0; j < 8; j++ {
			r := b.do("POST", "/v1/conversations/"+id+"/messages", b.admin, map[string]any{"agentId": "w", "content": big, "finality": "turn"})
			b.want(r, 201, "")
			seq = r.body["seq"].(float64)
			for { // the fast one keeps up
				f := readFrame(t, b.ctx, fast)
				if f["seq"] == seq {
					break
				}
			}
		}
	}
	// Writers and the fast one carry on.
	r := b.do("POST", "/v1/conversations/"+id+"/messages", b.admin, map[string]any{"agentId": "w", "content": "after", "finality": "turn"})
	b.want(r, 201, "")
	for {
		if f := readFrame(t, b.ctx, fast); f["seq"] == seq+1 {
			break
		}
	}
	// The slow one now reads: it gets what was buffered, then an error frame and a close.
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	var last map[string]any
	var lastSeq float64
	for {
		_, data, err := slow.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
				t.Fatalf("slow subscriber closed with %v, want 1013", err)
			}
			break
		}
		last = nil
		_ = json.Unmarshal(data, &last)
		if s, ok := last["seq"].(float64); ok {
			lastSeq = s
		}
	}
	if last["type"] != "error" || last["error"].(map[string]any)["code"] != "busy" {
		t.Fatalf("last frame before close = %v", last)
	}
	// It resumes from its last position and gets the rest.
	again := b.dialWS(id, fmt.Sprintf("?after=%d", int64(lastSeq)))
	if in := readFrame(t, b.ctx, again); in["recovered"] != true {
		t.Fatalf("resume init = %v", in)
	}
	for want := lastSeq + 1; want <= seq+1; want++ {
		f := readFrame(t, b.ctx, again)
		if f["type"] == "guidance" {
			want--
			continue
		}
		if f["seq"] != want {
			t.Fatalf("resumed frame seq %v, want %v", f["seq"], want)
		}
	}
}
