package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/dispatch"
	"github.com/parleyhq/parley/engine"
)

// maxRunnerFrame bounds one frame from a runner.
const maxRunnerFrame = 1 << 20

// runner serves GET /v1/conversations/{id}/runner: a WebSocket over which an
// agent streams its responses. Every frame that made something durable is
// answered {"type":"ack","seq":N}; a refused frame is answered
// {"type":"error","turnId":…,"error":{code,message}} and changes nothing.
func (s *Server) runner(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	act, err := actor(who, r.URL.Query().Get("agentId"))
	if err == nil {
		err = s.takesPart(r, r.PathValue("id"), act) // 404 unknown, 403 for an agent that takes no part
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	// Revoking the token ends the connection: an error frame, then close.
	cut := newCutoff()
	release, ok := s.connect(w, who, cut.end)
	if !ok {
		return
	}
	defer release()
	// One writer sends both the replies and what the engine pushes (prompts,
	// aborts, reverts), in order. A runner that cannot keep up is dropped.
	out := make(chan []byte, 256)
	done := make(chan struct{})
	defer close(done)
	overflow := make(chan struct{})
	var once sync.Once
	push := func(frame []byte) {
		select {
		case out <- frame:
		case <-done:
		default:
			once.Do(func() { close(overflow) })
		}
	}
	// The runner is attached before its handshake completes, so that
	// nothing pushed once it is connected is lost: the frames wait in out.
	// While it is attached it gets prompts and its agent's streaming
	// messages wait for it; when it leaves, its prompt goes back to the
	// queue and its messages wait the grace period, then end canceled.
	// Deleting the conversation pushes an error frame, then nil: close.
	defer s.runners.Attach(r.PathValue("id"), act.AgentID, push)()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(maxRunnerFrame)
	go func() {
		for {
			select {
			case frame := <-out:
				if frame == nil {
					c.Close(statusDeleted, "conversation deleted")
					return
				}
				wctx, cancel := context.WithTimeout(context.Background(), s.opts.WriteTimeout)
				err := c.Write(wctx, websocket.MessageText, frame)
				cancel()
				if err != nil {
					c.CloseNow()
					return
				}
			case <-overflow:
				c.CloseNow()
				return
			case <-cut.c:
				s.closeCut(c, cut.err)
				return
			case <-done:
				return
			}
		}
	}()
	rs := s.runners.Session(r.PathValue("id"), act)
	ctx := context.Background()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return // the runner went away; what it made durable stays
		}
		if cut.ended() {
			continue // nothing more is applied; the writer is closing
		}
		push(runnerReply(ctx, rs, data))
	}
}

// runnerReply applies one frame a runner sent and returns the reply frame:
// {"type":"ack","turnId":…,"seq":N} (with the message for message.state),
// or {"type":"error","turnId":…,"error":{code,message}}.
func runnerReply(ctx context.Context, rs *dispatch.Session, data []byte) []byte {
	var f dispatch.Frame
	err := decodeJSON(bytes.NewReader(data), maxRunnerFrame, &f)
	var res *engine.MessageResult
	if err == nil {
		res, err = rs.Apply(ctx, &f)
	}
	if err != nil {
		body := errorBody(err)
		body["type"], body["turnId"] = "error", f.TurnID
		b, _ := json.Marshal(body)
		return b
	}
	ack := map[string]any{"type": "ack", "turnId": f.TurnID, "seq": res.Seq}
	if f.Type == "message.state" {
		ack["message"] = res.Message
	}
	b, _ := json.Marshal(ack)
	return b
}
