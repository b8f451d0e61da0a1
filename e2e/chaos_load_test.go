package e2e

// The actors of the chaos test: runners streaming over the runner
// WebSocket, HTTP writers, and subscribers resuming over WebSocket and SSE.
// Each keeps going across server crashes, reconnecting on its own, and
// records every acknowledgement (or, for subscribers, every event) for the
// checks in chaos_test.go.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// ack is one write the server acknowledged: what the log must hold at seq.
type ack struct {
	conv string
	seq  int64
	// kind is message (an HTTP write), create, chunk, tool, finalize or
	// claim.
	kind  string
	msgID string
	// text is the message's content (message), the delta (chunk), or the
	// turn claimed (claim, whose agent is in msgID).
	text string
	// callID and status name the tool call a tool update set (tool).
	callID, status string
}

// ledger collects the acks of every actor, and what went wrong.
type ledger struct {
	mu   sync.Mutex
	acks []ack
	errs []string
	// abandoned are messages whose runner never came back: they must end
	// canceled. continued counts messages a runner resumed after a crash.
	abandoned []ack
	continued int
	// flaky counts the deltas flaky runners streamed, by conversation.
	flaky map[string]int
}

func (l *ledger) add(a ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

func (l *ledger) fail(format string, args ...any) {
	l.mu.Lock()
	if len(l.errs) < 20 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// delta is the k-th text delta of a message: numbered, so that a runner
// resuming a message can count what the server holds.
func delta(k int) string { return strconv.Itoa(k) + ";" }

// deltas returns the text of deltas 0..n-1.
func deltas(n int) string {
	var b strings.Builder
	for k := range n {
		b.WriteString(delta(k))
	}
	return b.String()
}

// writer posts messages over HTTP until ctx ends. A request whose answer
// was lost is sent again with the same clientRequestId until one answers,
// so the server must give the first write's seq back, or write it once.
func writer(ctx context.Context, l *ledger, base, conv, agent string) {
	c := client.New(base, "")
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("%s-%d", agent, i)
		m := client.Message{ID: id, AgentID: agent, Content: "writes " + id, ClientRequestID: "req-" + id, Finality: parley.FinalityTurn}
		for ctx.Err() == nil {
			res, err := c.PostMessage(ctx, conv, m)
			var se *client.StatusError
			switch {
			case err == nil:
				l.add(ack{conv: conv, seq: res.Seq, kind: "message", msgID: id, text: m.Content})
			case parley.ErrorCode(err) == parley.ETURNCONFLICT:
				// The other writer's message opened the turn a moment ago.
				pause(ctx, time.Millisecond)
				continue
			case parley.ErrorCode(err) == parley.EBUSY:
				// Writers on other nodes won the conversation several times
				// in a row: retry, as the answer says (same request id).
				pause(ctx, 5*time.Millisecond)
				continue
			case errors.As(err, &se) && se.Status < 500:
				l.fail("writer %s: %s refused: %v", agent, id, err)
				return
			default:
				pause(ctx, 20*time.Millisecond) // the server is down
				continue
			}
			break
		}
		pause(ctx, 2*time.Millisecond)
	}
}

// runner streams messages through the Go SDK's client.Runner until ctx
// ends: deltas, a tool call every 20 deltas, a finalize every 60. A steady
// runner reconnects after a crash, asks where its message stands (State)
// and continues it from there; a flaky one is never seen again, and its
// successor (a new agent) starts afresh, so its message must end canceled.
type runner struct {
	l              *ledger
	c              *client.Client
	conv           string
	name           string
	steady         bool
	gen, msgs      int
	agent, message string            // the message being streamed, "" between messages
	created        bool              // message.create of message was acknowledged
	tools          map[string]bool   // the tool calls of message already made
	next           int               // the next delta of message to send
	acked          int               // the deltas of message acknowledged (all before next, but those in flight)
	inFlight       []*client.Pending // deltas sent and not yet acknowledged (a steady runner keeps up to 8)
	finishing      bool              // a finalize of message was sent
	conn           *client.Runner
}

func (r *runner) run(ctx context.Context) {
	defer func() {
		if r.conn != nil {
			r.conn.Close()
		}
	}()
	r.agent = r.name
	for ctx.Err() == nil {
		if err := r.connect(ctx); err != nil {
			pause(ctx, 20*time.Millisecond)
			continue
		}
		if err := r.stream(ctx); err != nil && ctx.Err() == nil {
			r.conn.Close()
			r.conn = nil
			if !r.steady {
				if r.message != "" && r.created {
					r.l.mu.Lock()
					r.l.abandoned = append(r.l.abandoned, ack{conv: r.conv, msgID: r.message})
					r.l.mu.Unlock()
				}
				r.gen++
				r.agent, r.message = fmt.Sprintf("%s-g%d", r.name, r.gen), ""
			}
		}
	}
	// Stopping: a steady runner finishes its message on the way out.
	if !r.steady || r.message == "" {
		return
	}
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r.conn != nil && r.drain() != nil {
		r.conn.Close() // what the server holds is asked again below
		r.conn = nil
	}
	if r.conn == nil {
		if err := r.connect(fctx); err != nil {
			r.l.fail("runner %s: reconnecting to finish %s: %v", r.agent, r.message, err)
			return
		}
	}
	if r.message != "" {
		if err := r.finalize(); err != nil {
			r.l.fail("runner %s: finishing %s: %v", r.agent, r.message, err)
		}
	}
}

// connect opens the runner connection and, with a message under way, finds
// out how much of it the server holds.
func (r *runner) connect(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := r.c.ConnectRunner(dctx, r.conv, r.agent)
	if err != nil {
		return err
	}
	r.conn = conn
	if r.message == "" {
		return nil
	}
	octx, cancel := opContext()
	defer cancel()
	m, err := r.conn.State(octx, r.message)
	switch {
	case refused(err) && parley.ErrorCode(err) == parley.ENOTFOUND && !r.created:
		return nil // the create never became durable: it is sent again
	case refused(err):
		r.l.fail("runner %s: state of %s: %v", r.agent, r.message, err)
		return nil
	case err != nil:
		return err
	case m.Status == parley.StatusComplete && r.finishing:
		// The finalize was durable; its answer was lost with the server.
		r.message, r.finishing = "", false
		return nil
	case m.Status != parley.StatusStreaming:
		r.l.fail("runner %s: message %s is %s after the crash, want it still streaming", r.agent, r.message, m.Status)
		r.message = ""
		return nil
	}
	r.created = true // if its answer was lost, the create was durable all the same
	n := strings.Count(m.Content, ";")
	if m.Content != deltas(n) || n < r.acked || n > r.next {
		r.l.fail("runner %s: message %s holds %q after the crash; %d deltas were acknowledged, %d sent", r.agent, r.message, m.Content, r.acked, r.next)
	}
	r.next, r.acked, r.inFlight = n, n, nil
	r.l.mu.Lock()
	r.l.continued++
	r.l.mu.Unlock()
	// A tool call left running is finished now; a finished one is not
	// made again.
	for _, p := range m.Parts {
		if p.Type == parley.PartToolCall && p.Status == parley.ToolRunning {
			if err := r.tool(p.CallID, parley.ToolCompleted); err != nil {
				return err
			}
		}
		if p.Type == parley.PartToolCall {
			r.tools[p.CallID] = true
		}
	}
	return nil
}

// stream sends frames until the connection fails or ctx ends.
func (r *runner) stream(ctx context.Context) error {
	for ctx.Err() == nil {
		if r.message == "" {
			r.message, r.created, r.next, r.acked, r.tools = fmt.Sprintf("%s-m%d", r.agent, r.msgs), false, 0, 0, map[string]bool{}
			r.msgs++
		}
		if !r.created {
			err := r.send("create", ack{msgID: r.message}, func(ctx context.Context) (int64, error) { return r.conn.Create(ctx, r.message) })
			if parley.ErrorCode(err) == parley.ETURNCONFLICT {
				// A message abandoned by the runner before this one holds
				// the turn until it ends canceled.
				pause(ctx, 50*time.Millisecond)
				continue
			}
			if err != nil {
				return err
			}
			r.created = true
		}
		if r.next > 0 && (r.next%20 == 0 || r.steady && r.next == 60) {
			// A tool call or the finalize comes after every delta before it
			// is acknowledged.
			if err := r.drain(); err != nil {
				return err
			}
		}
		if call := fmt.Sprintf("call-%d", r.next); r.next > 0 && r.next%20 == 0 && !r.tools[call] {
			if err := r.tool(call, parley.ToolRunning); err != nil {
				return err
			}
			if err := r.tool(call, parley.ToolCompleted); err != nil {
				return err
			}
			r.tools[call] = true
		}
		if r.steady && r.next == 60 {
			r.finishing = true
			if err := r.finalize(); err != nil {
				return err
			}
			r.message, r.finishing = "", false
			continue
		}
		d := delta(r.next)
		if r.steady {
			// Up to 8 deltas in flight: the server commits those that come
			// while a commit is under way together, in one chunk.
			if err := r.sendAsync(d); err != nil {
				return err
			}
			r.next++
			continue
		}
		if err := r.send("chunk", ack{msgID: r.message, text: d}, func(ctx context.Context) (int64, error) { return r.conn.Text(ctx, r.message, d) }); err != nil {
			return err
		}
		r.next++
		r.acked++
		if !r.steady {
			pause(ctx, 3*time.Millisecond) // the flaky runner is slower
		}
	}
	return nil
}

// sendAsync sends delta d without waiting for its answer, once fewer than
// 8 deltas are in flight.
func (r *runner) sendAsync(d string) error {
	if len(r.inFlight) == 8 {
		if err := r.waitOne(); err != nil {
			return err
		}
	}
	ctx, cancel := opContext()
	defer cancel()
	p, err := r.conn.TextAsync(ctx, r.message, d)
	if err != nil {
		return err
	}
	r.inFlight = append(r.inFlight, p)
	return nil
}

// waitOne waits for the answer to the oldest delta in flight and records
// its ack.
func (r *runner) waitOne() error {
	p := r.inFlight[0]
	ctx, cancel := opContext()
	defer cancel()
	seq, err := p.Wait(ctx)
	if refused(err) {
		r.l.fail("runner %s: delta %d of %s refused: %v", r.agent, r.acked, r.message, err)
	}
	if err != nil {
		return err
	}
	r.inFlight = r.inFlight[1:]
	r.l.add(ack{conv: r.conv, seq: seq, kind: "chunk", msgID: r.message, text: delta(r.acked)})
	r.acked++
	return nil
}

// drain waits for every delta in flight.
func (r *runner) drain() error {
	for len(r.inFlight) > 0 {
		if err := r.waitOne(); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) tool(call, status string) error {
	u := client.ToolUpdate{CallID: call, ToolName: "search", Status: status, Args: json.RawMessage(`{"q":"x"}`)}
	return r.send("tool", ack{msgID: r.message, callID: call, status: status}, func(ctx context.Context) (int64, error) {
		return r.conn.Tool(ctx, r.message, u)
	})
}

func (r *runner) finalize() error {
	return r.send("finalize", ack{msgID: r.message}, func(ctx context.Context) (int64, error) {
		return r.conn.Finalize(ctx, r.message, parley.FinishEndTurn, "")
	})
}

// send makes one SDK call and records its ack. A refusal is a failure of
// the test (but for a turn conflict, which the caller handles); a lost
// connection is returned.
func (r *runner) send(kind string, a ack, call func(context.Context) (int64, error)) error {
	ctx, cancel := opContext()
	defer cancel()
	seq, err := call(ctx)
	if refused(err) && parley.ErrorCode(err) != parley.ETURNCONFLICT {
		r.l.fail("runner %s: %s of %s refused: %v", r.agent, kind, a.msgID, err)
	}
	if err != nil {
		return err
	}
	a.conv, a.seq, a.kind = r.conv, seq, kind
	r.l.add(a)
	if !r.steady && kind == "chunk" {
		r.l.mu.Lock()
		r.l.flaky[r.conv]++
		r.l.mu.Unlock()
	}
	return nil
}

// opContext bounds one runner call. It is not the actors' context: a
// stopping runner still finishes its message over its connection.
func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// refused reports whether err is the server's answer, not a lost connection.
func refused(err error) bool {
	var pe *parley.Error
	return errors.As(err, &pe)
}

// subscriber follows a conversation over one transport from seq 0 and,
// whenever the connection ends, resumes from the last seq it saw. It
// records every event; the server must never send one twice or skip one,
// and every resume must be recovered (no snapshot in place of the events).
type subscriber struct {
	l         *ledger
	base      string
	conv      string
	transport string // ws or sse
	mu        sync.Mutex
	events    []parley.Event
	epoch     string
	resumes   int
}

// last returns the seq of the last event seen.
func (s *subscriber) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return 0
	}
	return s.events[len(s.events)-1].Seq
}

func (s *subscriber) run(ctx context.Context) {
	for ctx.Err() == nil {
		next, stop, err := s.open(ctx)
		if err != nil {
			pause(ctx, 20*time.Millisecond)
			continue
		}
		s.follow(next)
		stop()
	}
}

// follow reads one connection's frames until it ends.
func (s *subscriber) follow(next func() ([]byte, error)) {
	first := true
	for {
		data, err := next()
		if err != nil {
			return
		}
		var head struct {
			Type      string `json:"type"`
			Recovered bool   `json:"recovered"`
			Position  parley.Position
		}
		if err := json.Unmarshal(data, &head); err != nil {
			s.l.fail("%s subscriber: bad frame %q: %v", s.transport, data, err)
			return
		}
		switch {
		case first:
			first = false
			if head.Type != "init" || !head.Recovered || head.Position.Seq != s.last() {
				s.l.fail("%s subscriber: resumed after %d with %s", s.transport, s.last(), data)
				return
			}
			s.mu.Lock()
			s.epoch = head.Position.Epoch
			s.resumes++
			s.mu.Unlock()
		case head.Type == "guidance":
		case head.Type == "error":
			return // e.g. too slow: resume
		default:
			var ev parley.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				s.l.fail("%s subscriber: bad event %q: %v", s.transport, data, err)
				return
			}
			if want := s.last() + 1; ev.Seq != want {
				s.l.fail("%s subscriber of %s: got seq %d, want %d (a gap or a duplicate)", s.transport, s.conv, ev.Seq, want)
				return
			}
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
		}
	}
}

// open connects from the last seq seen: WebSocket with ?after=&epoch=, SSE
// with Last-Event-ID, as a browser's EventSource resumes.
func (s *subscriber) open(ctx context.Context) (next func() ([]byte, error), stop func(), err error) {
	s.mu.Lock()
	after, epoch := int64(0), s.epoch
	if len(s.events) > 0 {
		after = s.events[len(s.events)-1].Seq
	}
	s.mu.Unlock()
	path := "/v1/conversations/" + s.conv
	if s.transport == "ws" {
		u := "ws" + strings.TrimPrefix(s.base, "http") + path + "/ws?after=" + strconv.FormatInt(after, 10)
		if epoch != "" {
			u += "&epoch=" + epoch
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(dctx, u, nil)
		if err != nil {
			return nil, nil, err
		}
		c.SetReadLimit(32 << 20)
		return func() ([]byte, error) {
			_, data, err := c.Read(ctx)
			return data, err
		}, func() { c.CloseNow() }, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(rctx, "GET", s.base+path+"/stream?after=0", nil)
	if after > 0 {
		req.Header.Set("Last-Event-ID", epoch+":"+strconv.FormatInt(after, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil, nil, err
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	return func() ([]byte, error) {
			var data []byte
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return nil, err
				}
				line = strings.TrimSuffix(line, "\n")
				switch {
				case line == "" && data != nil:
					return data, nil
				case strings.HasPrefix(line, "data: "):
					data = []byte(line[len("data: "):])
				}
			}
		}, func() {
			cancel()
			resp.Body.Close()
		}, nil
}
