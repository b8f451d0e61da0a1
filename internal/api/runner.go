package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/transport"
	"github.com/parleyhq/parley/internal/transport/wsconn"
)

// maxRunnerFrame bounds one frame from a runner.
const maxRunnerFrame = 1 << 20

// applier applies the frames of one runner connection: Submit returns the
// frame's Ack, its outcome once known (see runners.Session.Submit).
type applier interface {
	Submit(ctx context.Context, f *runners.Frame) *engine.Ack
}

// maxInFlight bounds the frames of one runner connection read and not yet
// answered: past it, the connection is read no further until answers go
// out.
const maxInFlight = 256

// runner serves GET /v1/conversations/{id}/runner: a WebSocket over which an
// agent streams its responses in one conversation. Every frame that made
// something durable is answered {"type":"ack","seq":N}; a refused frame is
// answered {"type":"error","turnId":…,"error":{code,message}} and changes
// nothing.
func (s *Server) runner(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	id := r.PathValue("id")
	act, err := actor(who, r.URL.Query().Get("agentId"))
	if err == nil {
		err = s.takesPart(r, id, act) // 404 unknown, 403 for an agent that takes no part
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	// While it is attached it gets prompts and its agent's streaming
	// messages wait for it; when it leaves, its prompt goes back to the
	// queue and its messages wait the grace period, then end canceled.
	// Deleting the conversation pushes an error frame, then nil: close.
	// Removing its agent from the conversation ends it as revoking its
	// token does, with forbidden.
	s.serveRunner(w, r, who, func(push func([]byte), end func(error)) (applier, func()) {
		return s.runners.Session(id, act), s.runners.AttachActor(id, act, push, end)
	})
}

// agentRunner serves GET /v1/agents/{agentId}/runner: one WebSocket over
// which an agent answers in every conversation it takes part in. Frames
// both ways name their conversation (conversationId), and so do acks and
// errors. The token must be the agent's (or an admin's).
func (s *Server) agentRunner(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	agent := r.PathValue("agentId")
	act, err := actor(who, agent)
	if err == nil && who.Kind == parley.TokenAgent && who.AgentID != agent {
		err = parley.Errorf(parley.EFORBIDDEN, "this token belongs to agent %s; it cannot run agent %s", who.AgentID, agent)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	// It works in the conversations its agent takes part in, whoever
	// connected it (an admin's runner of the agent too).
	check := func(ctx context.Context, id string) error {
		return s.eng.Require(ctx, id, func(st conv.State) error { return st.CanWrite(conv.Actor{AgentID: act.AgentID}) })
	}
	s.serveRunner(w, r, who, func(push func([]byte), _ func(error)) (applier, func()) {
		return s.runners.AttachAgent(act, push, check)
	})
}

// serveRunner runs a runner connection: attach (with the function that
// pushes frames to it) returns what applies its frames and what detaches
// it when it leaves. Once upgraded, the handler returns, and the frames
// are read as they arrive (wsconn.Conn.Serve: no goroutine waits on a
// runner that is silent) and applied in order, without waiting for each
// to be durable (text deltas and tool updates only queue). What goes out (prompts, aborts,
// reverts the server pushes, and the answers to the frames, each once
// what it wrote is durable) is written in one order, several per flush, by
// a writer that runs only while there is something to write (see runnerQueue).
func (s *Server) serveRunner(w http.ResponseWriter, r *http.Request, who parley.Identity, attach func(push func([]byte), end func(error)) (applier, func())) {
	// Revoking the token ends the connection: an error frame, then close.
	cut := newCutoff()
	q := newRunnerQueue()
	end := func(err error) {
		cut.end(err)
		q.kick()
	}
	release, ok := s.connect(w, r, who, end)
	if !ok {
		return
	}
	// The runner is attached before its handshake completes, so that
	// nothing pushed once it is connected is lost: the frames wait in q.
	rs, detach := attach(q.push, end)
	// A frame over wsconn.LargeMessage is a body in flight too: it takes
	// room from the server's budget of bodies, and must arrive in time.
	c, err := wsconn.Upgrade(w, r, wsconn.Options{OriginPatterns: s.opts.OriginPatterns, ReadLimit: maxRunnerFrame, BufferedReads: true, WriteTimeout: s.opts.WriteTimeout,
		Budget: s.bodies, ReadTimeout: s.opts.BodyTimeout})
	if err != nil {
		detach()
		release()
		return
	}
	q.mu.Lock()
	q.writer = func() { s.writeRunner(c, q, cut) }
	q.mu.Unlock()
	q.kick() // what was pushed before the upgrade
	ctx := context.Background()
	var f runners.Frame // each frame is parsed into it: handle runs one frame at a time
	c.Serve(func(data []byte) bool {
		if cut.ended() {
			return true // nothing more is applied; the writer is closing
		}
		return q.reply(runnerReply(ctx, rs, data, &f))
	}, func(error) {
		// The runner went away (what it made durable stays), or stopped
		// reading its answers.
		detach()
		q.close()
		release()
	})
}

// writeRunner writes what a runner connection's queue has ready, and
// returns when it has nothing more ready. Once the queue is closed and
// empty, the conversation is deleted (a nil frame), the token is cut off,
// or the runner stops reading, it closes the connection.
func (s *Server) writeRunner(c *wsconn.Conn, q *runnerQueue, cut *cutoff) {
	var scratch []byte // each answer is made in it; WriteText copies it
	for {
		if cut.ended() {
			q.end()
			s.closeCut(c, cut.err)
			c.CloseNow()
			return
		}
		items, done := q.take()
		if len(items) == 0 {
			if done {
				c.CloseNow() // closed, or overflowed
			}
			return
		}
		for _, it := range items {
			frame := it.frame
			if it.reply != nil {
				scratch = it.reply.appendFrame(scratch[:0])
				frame = scratch
				q.answered()
			} else if frame == nil {
				q.end()
				c.Close(transport.StatusDeleted, "conversation deleted")
				c.CloseNow()
				return
			}
			if c.WriteText(frame) != nil {
				q.end()
				c.CloseNow()
				return
			}
		}
		if c.Flush() != nil {
			q.end()
			c.CloseNow()
			return
		}
	}
}

// runnerReply applies one frame a runner sent and returns the function that
// waits for its outcome and makes the reply frame:
// {"type":"ack","turnId":…,"seq":N} (with the message for message.state),
// or {"type":"error","turnId":…,"error":{code,message}}; both name the
// frame's conversation if it did. The frame is parsed into f, the
// connection's own: a frame handed to the applier through its interface
// would otherwise be a new allocation of some 450 bytes for every delta.
// Nothing keeps f once Submit returns, and it is cleared then: each frame
// is decoded into a Frame with no slices left from the one before, so that
// the decoder never writes into the args or ids a queued command still
// holds.
func runnerReply(ctx context.Context, rs applier, data []byte, f *runners.Frame) *pendingReply {
	var ok bool
	*f, ok = runners.ParseFrame(data) // most frames: all strings
	if !ok || len(data) > maxRunnerFrame {
		*f = runners.Frame{}
		if err := decodeBytes(data, maxRunnerFrame, f); err != nil {
			r := &pendingReply{to: replyTo(f), ack: engine.Acked(nil, err)}
			*f = runners.Frame{}
			return r
		}
	}
	r := &pendingReply{to: replyTo(f), ack: rs.Submit(ctx, f)}
	*f = runners.Frame{}
	return r
}

// pendingReply is the answer to a frame, once its outcome is known. It
// keeps of the frame only what the answer names: a runner has frames in
// flight at every moment, and a frame is some 450 bytes.
type pendingReply struct {
	to  replyHead
	ack *engine.Ack
}

// replyHead is what an answer says of the frame it answers.
type replyHead struct{ typ, turnID, conversationID string }

func replyTo(f *runners.Frame) replyHead {
	return replyHead{typ: f.Type, turnID: f.TurnID, conversationID: f.ConversationID}
}

// ready reports whether the outcome is known.
func (p *pendingReply) ready() bool { return p.ack.Ready() }

// appendFrame appends the answer's frame to b, once the outcome is known:
// the connection's writer makes each ack in the same buffer, which the
// socket's write copies.
func (p *pendingReply) appendFrame(b []byte) []byte {
	res, err := p.ack.Wait()
	return appendReplyFrame(b, p.to, res, err)
}

// appendReplyFrame appends the answer to the frame f names, which came to
// res or err, to b.
func appendReplyFrame(b []byte, f replyHead, res *engine.MessageResult, err error) []byte {
	if err != nil {
		body := errorBody(err)
		body["type"], body["turnId"] = "error", f.turnID
		if f.conversationID != "" {
			body["conversationId"] = f.conversationID
		}
		j, _ := json.Marshal(body)
		return append(b, j...)
	}
	if f.typ == "message.state" {
		ack := map[string]any{"type": "ack", "turnId": f.turnID, "seq": res.Seq, "message": res.Message}
		if f.conversationID != "" {
			ack["conversationId"] = f.conversationID
		}
		j, _ := json.Marshal(ack)
		return append(b, j...)
	}
	// The ack of every delta: written by hand, as json.Marshal would write
	// the map (keys sorted).
	b = slices.Grow(b, 64+len(f.turnID)+len(f.conversationID))
	b = append(b, '{')
	if f.conversationID != "" {
		b = append(b, `"conversationId":`...)
		b = parley.AppendJSONString(b, f.conversationID)
		b = append(b, ',')
	}
	b = append(b, `"seq":`...)
	b = strconv.AppendInt(b, res.Seq, 10)
	b = append(b, `,"turnId":`...)
	b = parley.AppendJSONString(b, f.turnID)
	return append(b, `,"type":"ack"}`...)
}
