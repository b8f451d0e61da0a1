package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// stampLen is the bytes at the start of a delta or broadcast frame that
// carry its send time: nanoseconds since the run began, in hex.
const stampLen = 16

// filler pads deltas and frames with text that needs no JSON escaping.
const filler = "the quick brown fox jumps over the lazy dog "

// appendStamped appends a payload of n bytes: the stamp t, then filler.
func appendStamped(buf []byte, t time.Duration, n int) []byte {
	var h [stampLen]byte
	s := strconv.AppendUint(h[:0], uint64(t), 16)
	for range stampLen - len(s) {
		buf = append(buf, '0')
	}
	buf = append(buf, s...)
	for i := stampLen; i < n; {
		k := min(len(filler)-i%len(filler), n-i)
		buf = append(buf, filler[i%len(filler):i%len(filler)+k]...)
		i += k
	}
	return buf
}

// parseStamp reads the stamp at the start of a payload.
func parseStamp(s string) (time.Duration, bool) {
	if len(s) < stampLen {
		return 0, false
	}
	v, err := strconv.ParseUint(s[:stampLen], 16, 64)
	return time.Duration(v), err == nil
}

// frame kinds a runner sends.
const (
	kindDelta = iota
	kindTool
	kindCreate
	kindFinalize
	kindComplete
)

// pending is a frame sent and not yet answered. Answers come in the order
// the frames were sent: the server handles a runner's frames one at a time.
type pending struct {
	kind  int
	sent  time.Duration
	bytes int
	reply chan reply // only for frames the runner waits on
}

type reply struct {
	seq     int64
	err     error
	prompts int64 // prompt frames received before this answer
}

// runner is one conversation's runner connection.
type runner struct {
	b       *bench
	c       *conversation
	conn    *runnerConn
	pending chan pending // bounds the frames in flight
	done    chan struct{}
	err     error // why the connection ended; set before done is closed
	index   int   // picks its shard of the ack latency histogram
	buf     []byte
	sent    int // deltas sent
}

// connectRunner opens the runner WebSocket of c as the agent "bot".
func (b *bench) connectRunner(ctx context.Context, c *conversation) (*runner, error) {
	u := strings.Replace(b.urls[c.index%len(b.urls)], "http", "ws", 1) + "/v1/conversations/" + url.PathEscape(c.id) + "/runner?agentId=bot"
	h := http.Header{}
	if b.token != "" {
		h.Set("Authorization", "Bearer "+b.token)
	}
	conn, err := dialRunner(ctx, u, h)
	if err != nil {
		return nil, err
	}
	r := &runner{b: b, c: c, conn: conn, pending: make(chan pending, b.cfg.Window), done: make(chan struct{})}
	go r.read()
	return r, nil
}

// read takes the server's frames: answers to what was sent, and prompts.
func (r *runner) read() {
	defer close(r.done)
	for {
		data, err := r.conn.Read()
		if err != nil {
			r.err = err
			return
		}
		f, err := parseReply(data)
		if err != nil {
			r.b.fail(&r.b.cnt.runnerErrors, fmt.Errorf("runner: bad frame: %w", err))
			continue
		}
		switch f.Type {
		case "ack", "error":
			var p pending
			select {
			case p = <-r.pending:
			default:
				r.b.fail(&r.b.cnt.runnerErrors, fmt.Errorf("runner: an answer to no frame: %.200s", data))
				continue
			}
			rep := reply{seq: f.Seq, prompts: r.c.promptsRecv.Load()}
			if f.Type == "error" {
				rep.err = fmt.Errorf("runner frame refused: %s: %s", f.Error.Code, f.Error.Message)
				r.b.fail(&r.b.cnt.runnerErrors, rep.err)
			} else {
				r.acked(p, f.Seq)
			}
			if p.reply != nil {
				p.reply <- rep
			}
		case "prompt":
			r.c.promptsRecv.Add(1)
			select {
			case r.c.promptCh <- struct{}{}:
			default:
			}
		}
	}
}

// serverFrame is what the runner reads of a frame from the server.
type serverFrame struct {
	Type  string `json:"type"`
	Seq   int64  `json:"seq"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseReply reads a frame from the server: an ack of a delta as the
// server writes it ({"seq":N,"turnId":"…","type":"ack"}) without
// reflection, anything else with encoding/json.
func parseReply(data []byte) (serverFrame, error) {
	var f serverFrame
	const head, mid, tail = `{"seq":`, `,"turnId":"`, `","type":"ack"}`
	if s := string(data); strings.HasPrefix(s, head) && strings.HasSuffix(s, tail) {
		rest := s[len(head) : len(s)-len(tail)]
		if i := strings.Index(rest, mid); i > 0 && !strings.ContainsAny(rest[i+len(mid):], `"\`) {
			if seq, err := strconv.ParseInt(rest[:i], 10, 64); err == nil {
				f.Type, f.Seq = "ack", seq
				return f, nil
			}
		}
	}
	err := json.Unmarshal(data, &f)
	return f, err
}

func (r *runner) acked(p pending, seq int64) {
	now := r.b.now()
	for {
		last := r.c.lastSeq.Load()
		if seq <= last || r.c.lastSeq.CompareAndSwap(last, seq) {
			break
		}
	}
	switch p.kind {
	case kindDelta:
		r.b.cnt.deltasAcked.Add(1)
		r.b.cnt.textBytes.Add(int64(p.bytes))
		r.c.acked.Add(1)
		if r.b.inWindow(p.sent) {
			r.b.ack.record(r.index, now-p.sent)
		}
	case kindTool:
		r.b.cnt.toolAcked.Add(1)
		if r.b.inWindow(p.sent) {
			r.b.toolAck.record(r.index, now-p.sent)
		}
	}
}

var errRunnerClosed = errors.New("runner connection closed")

// send writes one frame once the window has room.
func (r *runner) send(kind int, frame []byte, size int, rep chan reply) error {
	p := pending{kind: kind, sent: r.b.now(), bytes: size, reply: rep}
	select {
	case r.pending <- p:
	case <-r.done:
		return fmt.Errorf("%w: %v", errRunnerClosed, r.err)
	}
	return r.conn.WriteText(frame)
}

// call sends a frame and waits for its answer.
func (r *runner) call(kind int, frame []byte) reply {
	rep := make(chan reply, 1)
	if err := r.send(kind, frame, 0, rep); err != nil {
		return reply{err: err}
	}
	select {
	case res := <-rep:
		return res
	case <-r.done:
		return reply{err: fmt.Errorf("%w: %v", errRunnerClosed, r.err)}
	}
}

// run streams messages until stop is closed, then finalizes the message it
// is on (and completes the prompt it answers) and returns.
func (r *runner) run(stop <-chan struct{}) {
	cfg := r.b.cfg
	pace := newPacer(cfg.Rate)
	// Runners start together; left in step, every one would make its tool
	// calls and its message boundaries (each rewrites the message's row and
	// sends it whole) in the same instant, and the bench would measure the
	// queue of that burst. A random first message length and tool phase
	// spread them out, as independent agents are.
	deltas := 1 + mrand.IntN(cfg.MessageDeltas)
	if cfg.ToolEvery > 0 {
		r.sent = mrand.IntN(cfg.ToolEvery)
	}
	for !closed(stop) {
		if r.c.promptsSent.Load() > r.c.promptsRecv.Load() {
			// A prompt is queued: let the server dispatch it before the next
			// message takes the floor, as a runner idle between prompts would.
			select {
			case <-r.c.promptCh:
			case <-stop:
			case <-time.After(time.Second):
			}
		}
		id := uuid.NewString()
		res := r.call(kindCreate, fmt.Appendf(nil, `{"type":"message.create","turnId":%q}`, id))
		if res.err != nil {
			if errors.Is(res.err, errRunnerClosed) {
				return
			}
			select { // refused (counted): try again shortly
			case <-stop:
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		answering := res.prompts > r.c.promptsDone.Load()
		if err := r.stream(id, deltas, pace, stop); err != nil {
			r.b.fail(&r.b.cnt.runnerErrors, err)
			return
		}
		if res := r.call(kindFinalize, fmt.Appendf(nil, `{"type":"message.finalize","turnId":%q,"reason":"end_turn"}`, id)); errors.Is(res.err, errRunnerClosed) {
			return
		}
		if answering {
			if res := r.call(kindComplete, []byte(`{"type":"complete"}`)); res.err == nil {
				r.c.promptsDone.Add(1)
				r.b.cnt.promptsAnswered.Add(1)
				r.c.promptBusy.Store(false)
			}
		}
		deltas = cfg.MessageDeltas
	}
}

// stream sends one message's n deltas (and tool calls), paced.
func (r *runner) stream(id string, n int, pace *pacer, stop <-chan struct{}) error {
	cfg := r.b.cfg
	for range n {
		if !pace.wait(stop) {
			return nil
		}
		r.sent++
		if cfg.ToolEvery > 0 && r.sent%cfg.ToolEvery == 0 {
			call := fmt.Sprintf("call-%d", r.sent)
			for _, status := range []string{"running", "completed"} {
				f := fmt.Appendf(r.buf[:0], `{"type":"message.part.tool-update","turnId":%q,"callId":%q,"toolName":"search","status":%q,"args":{"query":"parley bench"}`, id, call, status)
				if status == "completed" {
					f = append(f, `,"result":{"hits":3}`...)
				}
				r.buf = append(f, '}')
				if err := r.send(kindTool, r.buf, 0, nil); err != nil {
					return err
				}
			}
		}
		f := fmt.Appendf(r.buf[:0], `{"type":"message.part.text-delta","turnId":%q,"delta":"`, id)
		f = appendStamped(f, r.b.now(), cfg.DeltaBytes)
		r.buf = append(f, `"}`...)
		r.b.cnt.deltasSent.Add(1)
		if err := r.send(kindDelta, r.buf, cfg.DeltaBytes, nil); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) close() { r.conn.CloseNow() }

// pacer spaces sends at a rate; a pacer of rate 0 never waits. One that fell
// more than a second behind starts over rather than bursting to catch up.
type pacer struct {
	interval time.Duration
	next     time.Time
}

// newPacer returns a pacer whose first send comes at a random point of the
// first interval, so that many pacers started together do not send in step.
func newPacer(rate float64) *pacer {
	p := &pacer{next: time.Now()}
	if rate > 0 {
		p.interval = time.Duration(float64(time.Second) / rate)
		p.next = p.next.Add(-time.Duration(mrand.Int64N(int64(p.interval))))
	}
	return p
}

// wait returns false if stop closed first.
func (p *pacer) wait(stop <-chan struct{}) bool {
	if p.interval == 0 {
		return !closed(stop)
	}
	p.next = p.next.Add(p.interval)
	d := time.Until(p.next)
	if d <= 0 {
		if d < -time.Second {
			p.next = time.Now()
		}
		return !closed(stop)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// conversation is one streamed conversation and what the run knows of it.
type conversation struct {
	id          string
	index       int          // its place in the run: its runner's node is index mod the nodes
	acked       atomic.Int64 // text deltas acked
	lastSeq     atomic.Int64 // the highest seq acked to its runner
	promptsSent atomic.Int64 // prompts queued over HTTP
	promptsRecv atomic.Int64 // prompt frames its runner got
	promptsDone atomic.Int64 // prompts its runner completed
	promptBusy  atomic.Bool  // a prompt is being sent or answered
	promptCh    chan struct{}
	subs        []*subscriber
	runner      *runner
}
