package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// frameServer is a runner endpoint the test scripts frame by frame: each
// connection a runner opens comes on conns.
type frameServer struct {
	url   string
	conns chan *frameConn
}

// frameConn is one runner connection to a frameServer.
type frameConn struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan map[string]any
	seq    int64
}

func newFrameServer(t *testing.T) *frameServer {
	t.Helper()
	s := &frameServer{conns: make(chan *frameConn, 4)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := &frameConn{t: t, ws: ws, frames: make(chan map[string]any, 16)}
		s.conns <- c
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				close(c.frames)
				return
			}
			var f map[string]any
			_ = json.Unmarshal(data, &f)
			c.frames <- f
		}
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// conn waits for the next connection.
func (s *frameServer) conn(ctx context.Context) *frameConn {
	select {
	case c := <-s.conns:
		return c
	case <-ctx.Done():
		panic("no connection came")
	}
}

// expect reads the next frame, which must be of type typ, and acks it.
func (c *frameConn) expect(ctx context.Context, typ string) map[string]any {
	c.t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			c.t.Fatalf("the connection closed; want a %s frame", typ)
		}
		if f["type"] != typ {
			c.t.Fatalf("got frame %v, want a %s frame", f, typ)
		}
		c.seq++
		c.send(ctx, map[string]any{"type": "ack", "seq": c.seq})
		return f
	case <-ctx.Done():
		c.t.Fatalf("no %s frame came", typ)
	}
	return nil
}

func (c *frameConn) send(ctx context.Context, f map[string]any) {
	b, _ := json.Marshal(f)
	_ = c.ws.Write(ctx, websocket.MessageText, b)
}

func answered(requestID, status string, answer any) map[string]any {
	f := map[string]any{"type": "input.answered", "turnId": "m1", "requestId": requestID, "status": status, "answeredBy": "alice"}
	if answer != nil {
		f["answer"] = answer
	}
	return f
}

func frameRunner(t *testing.T) (*client.Runner, *frameServer, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := newFrameServer(t)
	r, err := client.New(s.url, "").ConnectRunner(ctx, "c1", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, s, ctx
}

// TestAskInputFrames: what AskApproval and AskQuestion send and take, frame
// by frame: the request, named by its message and with the fields asked;
// two requests answered in the other order each get their own outcome and
// ack it; an expired approval is a denial and an expired question
// ErrInputExpired; a canceled one is ErrInputCanceled.
func TestAskInputFrames(t *testing.T) {
	t.Parallel()
	r, s, ctx := frameRunner(t)
	c := s.conn(ctx)
	type result struct {
		a   parley.Approval
		q   json.RawMessage
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		a, err := r.AskApproval(ctx, "m1", parley.InputRequest{RequestID: "req_1", Title: "Run `rm -rf build`?", ToolName: "bash",
			ToolCallID: "call_1", Args: json.RawMessage(`{"command":"rm -rf build"}`)})
		first <- result{a: a, err: err}
	}()
	f := c.expect(ctx, "message.part.input-request")
	if f["turnId"] != "m1" || f["requestId"] != "req_1" || f["kind"] != "approval" || f["toolName"] != "bash" || f["toolCallId"] != "call_1" {
		t.Fatalf("the request frame is %v", f)
	}
	go func() {
		q, err := r.AskQuestion(ctx, "m1", parley.InputRequest{Title: "Which color?", Options: []parley.InputOption{{Label: "Red"}, {Label: "Blue"}}})
		second <- result{q: q, err: err}
	}()
	f = c.expect(ctx, "message.part.input-request")
	id2, _ := f["requestId"].(string)
	if f["kind"] != "question" || len(id2) < 5 {
		t.Fatalf("the question frame is %v", f)
	}
	c.send(ctx, answered(id2, "answered", map[string]any{"choices": []string{"Blue"}}))
	if ack := c.expect(ctx, "input.ack"); ack["requestId"] != id2 {
		t.Fatalf("acked %v, want %s", ack, id2)
	}
	if got := <-second; got.err != nil || string(got.q) != `{"choices":["Blue"]}` {
		t.Fatalf("AskQuestion returned %s, %v", got.q, got.err)
	}
	c.send(ctx, answered("req_1", "answered", map[string]any{"approved": true, "reason": "fine"}))
	c.expect(ctx, "input.ack")
	if got := <-first; got.err != nil || got.a != (parley.Approval{Approved: true, Reason: "fine"}) {
		t.Fatalf("AskApproval returned %+v, %v", got.a, got.err)
	}

	for _, tc := range []struct {
		status string
		want   parley.Approval
		err    error
	}{{"expired", parley.Approval{Reason: "expired"}, nil}, {"canceled", parley.Approval{Reason: "stopped"}, client.ErrInputCanceled}} {
		go func() {
			a, err := r.AskApproval(ctx, "m1", parley.InputRequest{RequestID: "req_" + tc.status})
			first <- result{a: a, err: err}
		}()
		c.expect(ctx, "message.part.input-request")
		out := answered("req_"+tc.status, tc.status, nil)
		out["reason"] = "stopped"
		c.send(ctx, out)
		c.expect(ctx, "input.ack")
		if got := <-first; got.a != tc.want || !errors.Is(got.err, tc.err) {
			t.Errorf("%s: AskApproval returned %+v, %v; want %+v, %v", tc.status, got.a, got.err, tc.want, tc.err)
		}
	}
	go func() {
		q, err := r.AskQuestion(ctx, "m1", parley.InputRequest{RequestID: "req_q"})
		second <- result{q: q, err: err}
	}()
	c.expect(ctx, "message.part.input-request")
	c.send(ctx, answered("req_q", "expired", nil))
	c.expect(ctx, "input.ack")
	if got := <-second; !errors.Is(got.err, client.ErrInputExpired) {
		t.Errorf("an expired question returned %s, %v; want ErrInputExpired", got.q, got.err)
	}
}

// TestAskInputAcrossAReconnect: the connection is lost while AskApproval
// waits, and the call reconnects; on the new connection the server says
// the request is pending (dropped: the call waits for it), then sends the
// outcome, which the call returns once; the outcome sent again (as if the ack was lost) is acked again and
// not handed to Next, while the outcome of a request nobody waits for is.
func TestAskInputAcrossAReconnect(t *testing.T) {
	t.Parallel()
	r, s, ctx := frameRunner(t)
	c := s.conn(ctx)
	got := make(chan error, 1)
	var a parley.Approval
	go func() {
		var err error
		a, err = r.AskApproval(ctx, "m1", parley.InputRequest{RequestID: "req_1"})
		got <- err
	}()
	c.expect(ctx, "message.part.input-request")
	go c.ws.Close(websocket.StatusGoingAway, "") // after the ack: the call reconnects by itself
	c = s.conn(ctx)
	c.send(ctx, map[string]any{"type": "input.pending", "turnId": "m1", "requestId": "req_1", "kind": "approval"})
	c.send(ctx, answered("req_1", "answered", map[string]any{"approved": false, "reason": "no"}))
	c.expect(ctx, "input.ack")
	if err := <-got; err != nil || a != (parley.Approval{Reason: "no"}) {
		t.Fatalf("AskApproval returned %+v, %v", a, err)
	}
	c.send(ctx, answered("req_1", "answered", map[string]any{"approved": false, "reason": "no"}))
	if ack := c.expect(ctx, "input.ack"); ack["requestId"] != "req_1" {
		t.Fatalf("acked %v", ack)
	}
	c.send(ctx, answered("req_old", "answered", map[string]any{"approved": true}))
	p, err := r.Next(ctx)
	if err != nil || p.Type != "input.answered" || p.MessageID != "m1" || p.Answered == nil || p.Answered.RequestID != "req_old" || string(p.Answered.Answer) != `{"approved":true}` {
		t.Fatalf("Next returned %+v, %v; want the outcome of req_old and nothing of req_1", p, err)
	}
	// A canceled wait leaves the request to Next.
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := r.AskApproval(cctx, "m1", parley.InputRequest{RequestID: "req_2"})
		got <- err
	}()
	c.expect(ctx, "message.part.input-request")
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("AskApproval returned %v after its ctx ended, want context.Canceled", err)
	}
	c.send(ctx, answered("req_2", "answered", map[string]any{"approved": true}))
	if p, err := r.Next(ctx); err != nil || p.Answered == nil || p.Answered.RequestID != "req_2" {
		t.Fatalf("Next returned %+v, %v; want the outcome of req_2", p, err)
	}
}

// TestACanceledCallKeepsTheConnection: a call whose ctx ends the moment
// its frame is out returns context.Canceled and leaves the runner
// connection, which every call shares, open. (The websocket library closes
// a connection whose write ctx ends mid-write; the runner once passed the
// caller's ctx to it, and lost its connection now and then.)
func TestACanceledCallKeepsTheConnection(t *testing.T) {
	t.Parallel()
	r, s, ctx := frameRunner(t)
	c := s.conn(ctx)
	for i := range 200 {
		cctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := r.AskApproval(cctx, "m1", parley.InputRequest{RequestID: "req_" + strconv.Itoa(i)})
			got <- err
		}()
		c.expect(ctx, "message.part.input-request")
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d returned %v, want context.Canceled", i, err)
		}
	}
	select {
	case <-s.conns:
		t.Fatal("the runner connected again: a canceled call cut its connection")
	default:
	}
}
