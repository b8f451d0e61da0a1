package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// flood sends bad requests and bad runner frames until stop closes, and
// counts them; each must be refused as documented. It reports the first
// answer that was not.
func (b *bundle) flood(id string, runner *websocket.Conn, stop <-chan struct{}, n *atomic.Int64) <-chan error {
	type req struct {
		method, path, token, body string
		status                    int
	}
	m := "/v1/conversations/" + id + "/messages"
	reqs := []req{
		{"POST", m, b.alice, `{"content":`, 400},
		{"POST", m, b.alice, `{"content":"x"} trailing`, 400},
		{"POST", m, b.alice, `{"content":"x","bogus":1}`, 400},
		{"POST", m, b.alice, `{"content":"` + strings.Repeat("o", 70<<10) + `"}`, 413},
		{"POST", m, "pk_bogus", `{"content":"x"}`, 401},
		{"POST", m, b.viewer, `{"content":"x"}`, 403},
		{"POST", m, b.alice, `{"agentId":"bob","content":"x"}`, 403},
		{"POST", "/v1/conversations/nope/messages", b.alice, `{"content":"x"}`, 404},
		{"POST", m, b.alice, `{"replyTo":"nope","content":"x"}`, 422},
		{"GET", "/v1/conversations/" + id + "/stream?after=-1", b.viewer, ``, 400},
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			q := reqs[i%len(reqs)]
			var body io.Reader
			if q.body != "" {
				body = strings.NewReader(q.body)
			}
			r, _ := http.NewRequestWithContext(b.ctx, q.method, b.url+q.path, body)
			r.Header.Set("Authorization", "Bearer "+q.token)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				done <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != q.status {
				done <- fmt.Errorf("%s %s %.40s: status %d, want %d", q.method, q.path, q.body, resp.StatusCode, q.status)
				return
			}
			if err := runner.Write(b.ctx, websocket.MessageText, []byte(`{"type":"message.part.text-delta","turnId":"nope","delta":"x"}`)); err != nil {
				done <- err
				return
			}
			var reply map[string]any
			_, data, err := runner.Read(b.ctx)
			if err == nil {
				err = json.Unmarshal(data, &reply)
			}
			if err != nil || reply["type"] != "error" {
				done <- fmt.Errorf("bad runner frame answered %s (%v)", data, err)
				return
			}
			n.Add(1)
		}
	}()
	return done
}

// TestSubscribersThatNeverReadDoNotStallOthers: a WebSocket and an SSE
// subscriber that never read, and a flood of bad requests and bad runner
// frames, go on while an agent writes. The two that never read are dropped
// with a busy error frame once their buffers fill (and may resume); the
// writer is never refused, and a WebSocket and an SSE subscriber that read
// see every event, once, in order. Nothing bad is written: the log holds
// exactly the writer's messages, densely.
func TestSubscribersThatNeverReadDoNotStallOthers(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	// A long write timeout: the slow ones are dropped for their buffers, not
	// for the time they take.
	b := setup(t, engine.Options{SubscriberBuffer: 16, Metrics: engine.NewMetrics(reg)},
		api.Options{MaxBodyBytes: 64 << 10, WriteTimeout: time.Hour, Gatherer: reg})
	id := b.conversation()

	slowWS := b.dialWS(id, "?after=0")
	slowReq, _ := http.NewRequestWithContext(b.ctx, "GET", b.url+"/v1/conversations/"+id+"/stream?after=0", nil)
	slowReq.Header.Set("Authorization", "Bearer "+b.viewer)
	slowSSE, err := http.DefaultClient.Do(slowReq)
	if err != nil || slowSSE.StatusCode != 200 {
		t.Fatalf("slow SSE: %v %v", err, slowSSE)
	}
	t.Cleanup(func() { slowSSE.Body.Close() })

	// The readers send every seq they see; the channels are big enough
	// never to block them.
	rctx, stopReaders := context.WithCancel(b.ctx)
	defer stopReaders()
	const maxWrites = 3000
	wsSeqs, sseSeqs := make(chan int64, maxWrites+100), make(chan int64, maxWrites+100)
	goodWS := b.dialWS(id, "?after=0")
	var wg sync.WaitGroup
	readerErrs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		readerErrs <- follow(rctx, func() (map[string]any, error) {
			_, data, err := goodWS.Read(rctx)
			var f map[string]any
			if err == nil {
				err = json.Unmarshal(data, &f)
			}
			return f, err
		}, wsSeqs)
	}()
	sseReq, _ := http.NewRequestWithContext(rctx, "GET", b.url+"/v1/conversations/"+id+"/stream?after=0", nil)
	sseReq.Header.Set("Authorization", "Bearer "+b.viewer)
	sseResp, err := http.DefaultClient.Do(sseReq)
	if err != nil || sseResp.StatusCode != 200 {
		t.Fatalf("good SSE: %v %v", err, sseResp)
	}
	defer sseResp.Body.Close()
	go func() {
		defer wg.Done()
		next := sseFrames(bufio.NewReader(sseResp.Body))
		readerErrs <- follow(rctx, func() (map[string]any, error) {
			ev, err := next()
			return ev.data, err
		}, sseSeqs)
	}()

	stop := make(chan struct{})
	var bad atomic.Int64
	flooded := b.flood(id, b.runnerConn(id, b.bob), stop, &bad)
	stopped := false
	stopFlood := func() {
		if !stopped {
			stopped = true
			close(stop)
			if err := <-flooded; err != nil {
				t.Errorf("flood: %v", err)
			}
		}
	}
	defer stopFlood()

	dropped := func() bool {
		r := b.do("GET", "/metrics", "", nil)
		return strings.Contains(string(r.raw), "parley_slow_subscriber_disconnects_total 2")
	}
	// seen waits, in lockstep, until both readers have seen seq, checking
	// that they see every seq once and in order.
	lastWS, lastSSE := int64(0), int64(0)
	seen := func(seq int64) {
		t.Helper()
		for _, r := range []struct {
			name string
			c    chan int64
			last *int64
		}{{"ws", wsSeqs, &lastWS}, {"sse", sseSeqs, &lastSSE}} {
			for *r.last < seq {
				select {
				case s := <-r.c:
					if s != *r.last+1 {
						t.Fatalf("the %s reader saw seq %d after %d", r.name, s, *r.last)
					}
					*r.last = s
				case err := <-readerErrs:
					t.Fatalf("a reader stopped: %v", err)
				case <-b.ctx.Done():
					t.Fatalf("the %s reader never saw seq %d", r.name, seq)
				}
			}
		}
	}
	big := strings.Repeat("w", 32<<10)
	var seq int64
	for i := 0; !dropped() || bad.Load() < 50; i++ {
		if i == maxWrites {
			t.Fatalf("after %d writes: slow subscribers dropped: %v, bad requests refused: %d", i, dropped(), bad.Load())
		}
		r := b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": big})
		b.want(r, 201, "")
		seq = int64(r.body["seq"].(float64))
		seen(seq)
	}
	stopFlood()
	t.Logf("%d writes and %d bad requests until both slow subscribers were dropped", seq-1, bad.Load())
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": "last"}), 201, "")
	seq++
	seen(seq)
	stopReaders()
	wg.Wait()

	// The log is dense and holds nothing but the writer's messages.
	events, err := b.db.ReadEvents(b.ctx, store.ReadEventsParams{ConversationID: id, Limit: int(seq) + 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckDense(events, 0); err != nil || int64(len(events)) != seq {
		t.Fatalf("log of %d events, want %d: %v", len(events), seq, err)
	}
	for _, e := range events[1:] {
		if e.Type != parley.EventMessage || e.AgentID != "alice" {
			t.Fatalf("event %d is %s by %s", e.Seq, e.Type, e.AgentID)
		}
	}

	// The two that never read now read: what was buffered, densely, then a
	// busy error; then they resume from where they stopped.
	var wsLast int64
	for {
		_, data, err := slowWS.Read(b.ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
				t.Fatalf("slow WebSocket ended with %v, want 1013", err)
			}
			break
		}
		var f map[string]any
		_ = json.Unmarshal(data, &f)
		if s := frameSeq(f); s > 0 {
			if s != wsLast+1 {
				t.Fatalf("slow WebSocket saw seq %d after %d", s, wsLast)
			}
			wsLast = s
		} else if f["type"] == "error" && f["error"].(map[string]any)["code"] != "busy" {
			t.Fatalf("slow WebSocket error frame %v", f)
		}
	}
	next := sseFrames(bufio.NewReader(slowSSE.Body))
	var sseLast int64
	var lastEvent sseEvent
	for {
		ev, err := next()
		if err != nil {
			break
		}
		lastEvent = ev
		if s := frameSeq(ev.data); s > 0 {
			if s != sseLast+1 {
				t.Fatalf("slow SSE saw seq %d after %d", s, sseLast)
			}
			sseLast = s
		}
	}
	if lastEvent.event != "error" || lastEvent.data["error"].(map[string]any)["code"] != "busy" {
		t.Fatalf("slow SSE's last event: %+v", lastEvent)
	}
	if wsLast >= seq || sseLast >= seq {
		t.Fatalf("the slow subscribers saw %d and %d of %d events: they were not behind", wsLast, sseLast, seq)
	}
	resumed, _ := b.openSSE(id, fmt.Sprintf("?after=%d", sseLast))
	if in := resumed(); in.data["recovered"] != true {
		t.Fatalf("resume: %+v", in)
	}
	for want := sseLast + 1; want <= seq; {
		ev := resumed()
		if s := frameSeq(ev.data); s > 0 {
			if s != want {
				t.Fatalf("resumed at seq %d, want %d", s, want)
			}
			want++
		}
	}
}
