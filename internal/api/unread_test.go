package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metric reads a gauge or a counter from the server's /metrics.
func (b *bundle) metric(name string) float64 {
	b.t.Helper()
	r := b.do("GET", "/metrics", "", nil)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(r.raw)))
	if err != nil {
		b.t.Fatal(err)
	}
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) != 1 {
		b.t.Fatalf("/metrics has no %s", name)
	}
	if c := f.GetMetric()[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// unreadSetup serves an engine whose subscribers may hold budget bytes
// that their clients have not read, with its metrics on /metrics, and
// makes a conversation whose snapshot weighs about 1 MB (8 messages of 60
// KB of text, each about 120 KB in JSON).
func unreadSetup(t *testing.T, budget int64, aopts api.Options) (*bundle, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	aopts.Gatherer = reg
	b := setup(t, engine.Options{SubscriberMemory: budget, Metrics: engine.NewMetrics(reg)}, aopts)
	id := b.conversation()
	for range 8 {
		r := b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": bigText[:60_000]})
		b.want(r, 201, "")
	}
	return b, id
}

// patient are the options of a server whose streams that read nothing are
// dropped by the budget only, not by the write timeout or for answering no
// ping, however slow the machine.
var patient = api.Options{WriteTimeout: time.Hour, HeartbeatInterval: time.Hour}

// unreadStream is a stream whose client reads nothing until told to:
// over SSE or over WebSocket.
type unreadStream struct {
	sse func() (sseEvent, error)
	ws  *websocket.Conn
}

func (b *bundle) unreadStream(id string, ws bool) unreadStream {
	b.t.Helper()
	if ws {
		return unreadStream{ws: b.dialWS(id, "")}
	}
	_, resp := b.openSSE(id, "")
	next := sseFrames(bufio.NewReader(resp.Body))
	return unreadStream{sse: next}
}

// readUntil reads the stream until the server ends it, or it has read
// the event of seq until (0: no such bound), and returns the seq of the
// last event it got, the code of the error frame it ended with ("" if
// none), and, on WebSocket, the close status.
func (u unreadStream) readUntil(ctx context.Context, until float64) (last float64, code string, status websocket.StatusCode) {
	var frame map[string]any
	for until == 0 || last < until {
		if u.sse != nil {
			ev, err := u.sse()
			if err != nil {
				return last, code, -1
			}
			frame = ev.data
		} else {
			_, data, err := u.ws.Read(ctx)
			if err != nil {
				return last, code, websocket.CloseStatus(err)
			}
			frame = nil
			_ = json.Unmarshal(data, &frame)
		}
		if seq, ok := frame["seq"].(float64); ok && frame["type"] != "init" {
			last = seq
		}
		if frame["type"] == "error" {
			code, _ = frame["error"].(map[string]any)["code"].(string)
		}
	}
	return last, code, 0
}

// readTo reads the stream up to the event of seq want, and fails the test
// if it ends first or sends an error frame.
func (u unreadStream) readTo(t *testing.T, ctx context.Context, want float64) {
	t.Helper()
	for {
		var frame map[string]any
		if u.sse != nil {
			ev, err := u.sse()
			if err != nil {
				t.Fatalf("a stream that was not dropped ended before seq %v: %v", want, err)
			}
			frame = ev.data
		} else {
			frame = readFrame(t, ctx, u.ws)
		}
		if frame["type"] == "error" {
			t.Fatalf("a stream that was not dropped ended before seq %v: %v", want, frame)
		}
		if frame["type"] != "init" && frame["seq"] == want {
			return
		}
	}
}

// TestUnreadStreamsStayWithinTheServersMemory: streams that read nothing
// (over SSE and WebSocket) of a conversation of large messages hold what
// is written for them only up to the server-wide budget
// (engine.Options.SubscriberMemory, parley serve -subscriber-memory), as
// the server counts it on /metrics (parley_subscriber_bytes), though each
// stays within its own bounds: past it, those that stopped reading first
// are dropped, with an error frame busy (close code 1013), and resume
// exactly from their last event; those that stopped later are not
// dropped while dropping the first is enough, and get every event once
// they read; a stream that reads gets every event and is never dropped.
func TestUnreadStreamsStayWithinTheServersMemory(t *testing.T) {
	large(t)
	t.Parallel()
	const budget = 8 << 20
	b, id := unreadSetup(t, budget, patient)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reader := b.dialWS(id, "")
	readFrame(t, ctx, reader) // init
	var seq float64
	write := func() {
		t.Helper()
		r := b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": bigText[:400<<10]})
		b.want(r, 201, "")
		seq = r.body["seq"].(float64)
		for { // the reader keeps up, and misses nothing
			f := readFrame(t, ctx, reader)
			if f["type"] == "error" {
				t.Fatalf("the reading stream was dropped: %v", f)
			}
			if s, ok := f["seq"].(float64); ok {
				if s == seq {
					break
				}
				if s > seq {
					t.Fatalf("the reading stream got seq %v before %v", s, seq)
				}
			}
		}
		if held := b.metric("parley_subscriber_bytes"); held > budget {
			t.Fatalf("after seq %v the server holds %v bytes for its subscribers, over its budget of %d", seq, held, budget)
		}
	}

	// The first to stop reading: 2 over SSE, 2 over WebSocket. Written to
	// until they hold half the budget, past what their sockets take.
	var first, later []unreadStream
	for i := range 4 {
		first = append(first, b.unreadStream(id, i%2 == 1))
	}
	for i := 0; b.metric("parley_subscriber_bytes") < budget/2; i++ {
		if i == 200 {
			t.Fatal("streams that read nothing never held half the budget")
		}
		write()
	}
	// Then 4 more, and writes until the first are dropped.
	for i := range 4 {
		later = append(later, b.unreadStream(id, i%2 == 1))
	}
	for i := 0; b.metric("parley_subscribers_shed_total") < 4; i++ {
		if i == 200 {
			t.Fatalf("the streams that read nothing were never dropped (%v shed)", b.metric("parley_subscribers_shed_total"))
		}
		write()
	}
	if shed := b.metric("parley_subscribers_shed_total"); shed != 4 {
		t.Fatalf("%v streams dropped, want the 4 that stopped reading first", shed)
	}

	// Each of the first gets what was under way, then busy, and resumes
	// exactly after its last event.
	for i, u := range first {
		last, code, status := u.readUntil(ctx, 0)
		if code != "busy" || (u.ws != nil && status != websocket.StatusTryAgainLater) {
			t.Fatalf("stream %d that read nothing ended with %q (close %d) after seq %v, want busy (1013)", i, code, status, last)
		}
		again := b.dialWS(id, fmt.Sprintf("?after=%d", int64(last)))
		if in := readFrame(t, ctx, again); in["recovered"] != true {
			t.Fatalf("stream %d resumed after seq %v: %v", i, last, in)
		}
		for want := last + 1; want <= seq; {
			f := readFrame(t, ctx, again)
			if f["type"] == "guidance" {
				continue
			}
			if f["seq"] != want {
				t.Fatalf("stream %d resumed after seq %v: got seq %v, want %v", i, last, f["seq"], want)
			}
			want++
		}
		again.CloseNow()
	}
	// The later ones were not dropped: they get every event.
	for _, u := range later {
		u.readTo(t, ctx, seq)
	}
	write()
	if shed := b.metric("parley_subscribers_shed_total"); shed != 4 {
		t.Fatalf("%v streams dropped once the others read, want 4", shed)
	}
}

// TestANewStreamMakesRoom: a stream that joins with a snapshot while
// streams that read nothing hold nearly all of the server-wide budget is
// let in, and as many of them as that takes are dropped to make room for
// it (busy); the others get every event.
func TestANewStreamMakesRoom(t *testing.T) {
	large(t)
	t.Parallel()
	const budget = 3 << 20
	b, id := unreadSetup(t, budget, patient)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	probe := b.dialWS(id, "")
	_, init, err := probe.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	probe.CloseNow()

	// Streams that read nothing, written to until they hold more than the
	// budget leaves for one more snapshot.
	var old []unreadStream
	for i := range 2 {
		old = append(old, b.unreadStream(id, i == 1))
	}
	for i := 0; b.metric("parley_subscriber_bytes") <= float64(budget-len(init)); i++ {
		if i == 500 {
			t.Fatal("streams that read nothing never held the budget")
		}
		r := b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": bigText[:100_000]})
		b.want(r, 201, "")
	}
	if shed := b.metric("parley_subscribers_shed_total"); shed != 0 {
		t.Fatalf("%v streams dropped before the new one came", shed)
	}
	next, _ := b.openSSE(id, "")
	if in := next(); in.event != "init" || in.data["messages"] == nil {
		t.Fatalf("a new stream with a snapshot: %+v, want its init", in)
	}
	if shed := b.metric("parley_subscribers_shed_total"); shed < 1 {
		t.Fatal("the new stream was let in, and no stream that reads nothing was dropped to make room")
	}
	if held := b.metric("parley_subscriber_bytes"); held > budget {
		t.Fatalf("the server holds %v bytes for its subscribers, over its budget of %d", held, budget)
	}
	// Those dropped end with busy; the others get every event.
	last := b.lastSeq(id)
	ended := 0
	for i, u := range old {
		got, code, _ := u.readUntil(ctx, last)
		switch {
		case code == "busy":
			ended++
		case got != last:
			t.Fatalf("old stream %d ended with %q after seq %v, want busy, or every event to %v", i, code, got, last)
		}
	}
	if shed := b.metric("parley_subscribers_shed_total"); float64(ended) != shed {
		t.Fatalf("%d streams ended with busy, and %v were dropped", ended, shed)
	}
}

// TestAStreamNoRoomCanBeMadeForIsRefused: a snapshot larger than the
// whole server-wide budget, with nothing else held, is refused with 503
// unavailable and Retry-After, over SSE and WebSocket, before any stream
// begins, and leaves nothing held; a stream that resumes from a position
// (no snapshot) is let in.
func TestAStreamNoRoomCanBeMadeForIsRefused(t *testing.T) {
	t.Parallel()
	b, id := unreadSetup(t, 256<<10, api.Options{})
	for _, path := range []string{"/stream", "/ws"} {
		resp, err := http.DefaultClient.Do(b.request("GET", "/v1/conversations/"+id+path, b.viewer, nil,
			"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode != 503 || !strings.Contains(string(body), `"code":"unavailable"`) || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s with a snapshot over the budget: %d, Retry-After %q, %.200s; want 503 unavailable, Retry-After 1", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if held := b.metric("parley_subscriber_bytes"); held != 0 {
		t.Fatalf("refused streams left %v bytes held", held)
	}
	next, _ := b.openSSE(id, fmt.Sprintf("?after=%d", int64(b.lastSeq(id))))
	if in := next(); in.event != "init" || in.data["recovered"] != true {
		t.Fatalf("a stream that resumes: %+v, want its init", in)
	}
}

// TestAStreamDroppedWhileItsSnapshotIsSentIsCut: a stream whose client
// has not taken its snapshot (over HTTP/2, whose flow control stops the
// server's writes in the server: the client gives a window of 64 KiB and
// reads nothing) holds it as the frame being written; dropped to make
// room for a new stream, it is cut at once, so that the frame is let go
// rather than held until its client reads (it has no position yet to
// resume from, and comes back as it came), while the new stream gets its
// snapshot.
func TestAStreamDroppedWhileItsSnapshotIsSentIsCut(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	const budget = 1536 << 10
	b, handler := setupServer(t, engine.Options{SubscriberMemory: budget, Metrics: engine.NewMetrics(reg)},
		api.Options{WriteTimeout: time.Hour, HeartbeatInterval: time.Hour, Gatherer: reg})
	id := b.conversation()
	for range 8 { // a snapshot of about 1 MB
		r := b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": bigText[:60_000]})
		b.want(r, 201, "")
	}
	h2 := httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	tr := h2.Client().Transport.(*http.Transport).Clone()
	tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10}
	req, _ := http.NewRequestWithContext(b.ctx, "GET", h2.URL+"/v1/conversations/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+b.viewer)
	first, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil || first.StatusCode != 200 || first.ProtoMajor != 2 {
		t.Fatalf("the stream over HTTP/2: %v %v", first, err)
	}
	defer first.Body.Close()
	for i := 0; b.metric("parley_subscriber_bytes") < 512<<10; i++ { // its snapshot, being written
		if i == 1000 {
			t.Fatal("a stream whose client takes nothing of its snapshot was never counted as holding it")
		}
		time.Sleep(10 * time.Millisecond)
	}

	next, _ := b.openSSE(id, "")
	if in := next(); in.event != "init" || in.data["messages"] == nil {
		t.Fatalf("the new stream: %+v, want its init", in)
	}
	if shed := b.metric("parley_subscribers_shed_total"); shed != 1 {
		t.Fatalf("%v streams dropped, want the one that had not taken its snapshot", shed)
	}
	got, err := io.ReadAll(first.Body)
	if err == nil || strings.Contains(string(got), "\n\n") {
		t.Fatalf("the dropped stream got %d bytes and %v: its whole snapshot, held until its client read it; want it cut", len(got), err)
	}
}

// TestAChatStreamHoldsNothingItSent: the answer streams of a chat (the
// AI SDK's, the question's own and a resumed one) count what waits for
// them against what the server holds for streams that are not read only
// until they take it: once they have sent every event of the answer so
// far, the server holds nothing for them.
func TestAChatStreamHoldsNothingItSent(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, engine.Options{Metrics: engine.NewMetrics(reg)}, api.Options{Gatherer: reg})
	id := b.conversation("alice")
	first := events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u1", "What is 6 x 7?")))
	defer first.resp.Body.Close()
	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, 4)
	resumed := events(t, b.send("GET", "/v1/chat/"+id+"/stream", b.bob, nil))
	defer resumed.resp.Body.Close()
	for range 7 { // start, text-start, 2 deltas, text-end, tool-input-start, -available
		if _, ok := resumed.next(); !ok {
			t.Fatal("the resumed stream ended early")
		}
	}
	for i := 0; b.metric("parley_subscriber_bytes") != 0; i++ {
		if i == 1000 {
			t.Fatalf("two chat streams that sent all there is: the server holds %v bytes for them", b.metric("parley_subscriber_bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
