package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/parleyhq/parley"
)

// Handler answers the prompts a Runner serves (Runner.Serve).
type Handler interface {
	// Answer answers one prompt, rp.Prompt, by writing the answer with rp's
	// methods, and returns when it is done. Its ctx is canceled when the
	// answer is aborted (a steer, a stop, a revert of the answer) or Serve
	// ends: stop then, and return (what it returns no longer matters). An
	// error it returns otherwise ends the answer with an error part that
	// shows the error's text.
	Answer(ctx context.Context, rp *Reply) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, rp *Reply) error

// Answer implements Handler.
func (f HandlerFunc) Answer(ctx context.Context, rp *Reply) error { return f(ctx, rp) }

// Reverter is implemented by a Handler that wants to hear of reverts:
// messageID and every message after it were removed, and a runner that
// keeps its own history (an LLM session) drops them too. Serve calls it
// between the frames it reads, so it should return quickly.
type Reverter interface {
	Revert(ctx context.Context, messageID string)
}

// Serve answers the prompts the server dispatches to the runner, one at a
// time in each conversation, with h, until ctx ends (it returns ctx's
// error), Close is called (ErrRunnerClosed), or the server ends the runner
// for good (the conversation deleted, the token revoked: a *StatusError).
// An agent-wide runner (ConnectAgentRunner) answers the prompts of its
// conversations side by side, each in its own call of h.Answer, and goes
// on when one of its conversations is deleted (a Reverter hears nothing of
// it: the answer under way there is canceled). For each prompt it calls
// h.Answer, and then:
//
//   - when Answer returns nil, it finalizes the message still open (reason
//     end_turn) and sends complete;
//   - when it returns an error, it ends the answer with an error part (a
//     message is made for it if none was) and sends complete;
//   - when the server aborts the answer (a steer, a stop, a revert, an
//     abort of the turn it is written in), it cancels Answer's ctx, waits
//     for Answer to return, and sends aborted, which ends the message
//     canceled and the prompt with it. A write into the answer's message
//     refused with turn_conflict (its turn was aborted before the abort
//     frame came) ends the answer the same way, whatever Answer returns:
//     no error part is written.
//
// When the connection is lost, Serve and the Reply's calls reconnect (with
// backoff) and ask State where the message stands, so that every frame
// is applied exactly once: the answer goes on where it was, in the same
// message, as the server keeps it for the agent's runner for its grace
// period (30s by default). A prompt the server dispatches again after a
// reconnect is not answered twice. When ctx ends, Serve cancels Answer,
// waits for it and returns without ending anything: once the runner is
// closed, the server gives the prompt to the agent's next runner.
//
// A handler may ask a person mid-answer (Reply.AskApproval, AskQuestion);
// Serve acks the outcome of a request no handler waits for any more (the
// answer that asked was stopped, or asked before a restart), since no
// handler can take it.
//
// Do not call Next while Serve runs: Serve reads what the server sends.
func (r *Runner) Serve(ctx context.Context, h Handler) error {
	s := &serving{r: r, h: h, ctx: ctx, lanes: map[string]*lane{}, ended: map[promptKey]string{}, done: make(chan *job)}
	return s.run()
}

// serving is the state of one Serve.
type serving struct {
	r     *Runner
	h     Handler
	ctx   context.Context
	lanes map[string]*lane // the conversations at work, by id ("" on a conversation's own runner)
	ended map[promptKey]string
	order []promptKey // of ended, oldest first, to bound it
	done  chan *job
}

// lane is one conversation's work: the prompt being answered and those
// dispatched while it was.
type lane struct {
	r       *Runner // the runner in this conversation (In)
	job     *job
	waiting []Push
}

// promptKey names a prompt: its conversation (on an agent-wide runner)
// and its id.
type promptKey struct{ conversation, id string }

// job is one prompt being answered.
type job struct {
	p       Push
	rp      *Reply
	cancel  context.CancelFunc
	aborted bool
	err     error
}

// maxEnded bounds how many answered prompts Serve remembers, to end again
// one the server dispatches again after a reconnect.
const maxEnded = 1024

func (s *serving) run() error {
	for {
		c := s.r.current()
		var err error
		select {
		case <-s.ctx.Done():
			err = s.ctx.Err()
		case j := <-s.done:
			err = s.finish(j)
		case p := <-c.pushes:
			err = s.take(p)
		case <-c.done:
			if c.fatal != nil {
				err = c.fatal
			} else {
				_, err = s.r.reconnect(s.ctx, c)
			}
		}
		if err != nil {
			s.stop()
			return err
		}
	}
}

// stop cancels the answers under way and waits for their handlers.
func (s *serving) stop() {
	n := 0
	for _, l := range s.lanes {
		if l.job != nil {
			l.job.cancel()
			n++
		}
	}
	for ; n > 0; n-- {
		j := <-s.done
		j.rp.close()
	}
	clear(s.lanes)
}

// lane returns the lane of a conversation, made when it is first named.
func (s *serving) lane(conversationID string) *lane {
	l := s.lanes[conversationID]
	if l == nil {
		l = &lane{r: s.r.In(conversationID)}
		s.lanes[conversationID] = l
	}
	return l
}

// idle forgets a lane with nothing to do.
func (s *serving) idle(conversationID string, l *lane) {
	if l.job == nil && len(l.waiting) == 0 {
		delete(s.lanes, conversationID)
	}
}

// take acts on one frame the server sent.
func (s *serving) take(p Push) error {
	l := s.lane(p.ConversationID)
	defer s.idle(p.ConversationID, l)
	key := promptKey{p.ConversationID, p.PromptID}
	switch p.Type {
	case "prompt":
		switch outcome, ended := s.ended[key]; {
		case l.job != nil && l.job.p.PromptID == p.PromptID:
			// Dispatched again after a reconnect: it is being answered.
		case ended:
			// Answered before the server gave it back: end it again.
			return s.end(l, p.PromptID, outcome, "")
		case l.job != nil:
			for _, w := range l.waiting {
				if w.PromptID == p.PromptID {
					return nil
				}
			}
			l.waiting = append(l.waiting, p)
		default:
			s.start(l, p)
		}
	case "abort":
		if j := l.job; j != nil && (p.PromptID == "" || p.PromptID == j.p.PromptID) {
			j.aborted = true
			j.cancel()
			return nil
		}
		for i, w := range l.waiting {
			if w.PromptID == p.PromptID {
				l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
				return s.end(l, p.PromptID, "aborted", "")
			}
		}
	case "revert":
		if rv, ok := s.h.(Reverter); ok {
			rv.Revert(s.ctx, p.MessageID)
		}
	case "input.answered":
		// The outcome of a request no handler waits for any more (its
		// answer was stopped, or asked before a restart): nobody can act
		// on it, so it is acked, not sent again. A lost ack is sent again
		// with the outcome's next delivery.
		go l.r.AckInput(s.ctx, p.Answered.RequestID)
	case "error":
		// An agent-wide runner's work in this conversation has ended (it
		// was deleted): nothing of it is answered any more.
		l.waiting = nil
		if j := l.job; j != nil {
			j.aborted = true
			j.cancel()
		}
	}
	return nil
}

// start runs the handler of prompt p in its lane.
func (s *serving) start(l *lane, p Push) {
	ctx, cancel := context.WithCancel(s.ctx)
	j := &job{p: p, cancel: cancel, rp: &Reply{Prompt: p, r: l.r, wire: s.ctx}}
	l.job = j
	go func() {
		j.err = s.h.Answer(ctx, j.rp)
		s.done <- j
	}()
}

// finish ends the answer whose handler returned, as Serve says, and
// starts the next prompt waiting in its conversation. Refusals are not
// errors: the answer ends as well as the server lets it (a reverted
// message, say).
func (s *serving) finish(j *job) error {
	l := s.lane(j.p.ConversationID)
	defer s.idle(j.p.ConversationID, l)
	l.job = nil
	j.cancel()
	rp := j.rp
	rp.close()
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	outcome := "complete"
	var err error
	switch {
	case j.aborted || rp.wasCut():
		// Stopped, or its turn was aborted under it: aborted ends the
		// message canceled (no error part) and the prompt with it.
		outcome = "aborted"
	case j.err != nil:
		err = rp.fail(s.ctx, j.err.Error())
	case rp.msg != "":
		err = rp.finalize(s.ctx, FinalizeOptions{})
	}
	if err == nil || refused(err) {
		err = s.end(l, j.p.PromptID, outcome, rp.msg)
	}
	if err != nil && !refused(err) {
		return err
	}
	if len(l.waiting) > 0 {
		p := l.waiting[0]
		l.waiting = l.waiting[1:]
		s.start(l, p)
	}
	return nil
}

// end sends complete or aborted (with the message it cancels, if any) for
// prompt id of lane l, and remembers that it did.
func (s *serving) end(l *lane, id, outcome, msg string) error {
	key := promptKey{l.r.scope, id}
	if _, ok := s.ended[key]; !ok {
		s.ended[key] = outcome
		s.order = append(s.order, key)
		if len(s.order) > maxEnded {
			delete(s.ended, s.order[0])
			s.order = s.order[1:]
		}
	}
	frame := omitEmptyStrings(map[string]any{"type": outcome, "messageId": id, "turnId": msg})
	_, err := l.r.deliver(s.ctx, frame, "", nil)
	if refused(err) {
		return nil
	}
	return err
}

// refused reports whether err is the server's answer (a *StatusError).
func refused(err error) bool {
	var se *StatusError
	return errors.As(err, &se)
}

// lost reports whether err is a lost connection: not the server's answer,
// not ctx's end, not a closed runner.
func lost(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !refused(err) && !errors.Is(err, ErrRunnerClosed)
}

// deliver sends frame and returns its reply once the server applied it,
// exactly once, reconnecting as often as it takes: when a connection is
// lost before the frame's answer came, applied(State of msg) says whether
// it was applied (m is nil when the server does not know msg), and if not
// it is sent again on the new connection. With msg empty the frame is
// sent again: it must change nothing the second time.
func (r *Runner) deliver(ctx context.Context, frame map[string]any, msg string, applied func(m *parley.Message) bool) (*runnerReply, error) {
	c := r.current()
	for {
		reply, err := r.exchange(ctx, c, frame)
		if !lost(ctx, err) {
			return reply, err
		}
		for {
			if c, err = r.reconnect(ctx, c); err != nil {
				return nil, err
			}
			if msg == "" {
				break
			}
			m, err := r.stateOn(ctx, c, msg)
			if lost(ctx, err) {
				continue
			}
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				m, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
			if applied(m) {
				return &runnerReply{Type: "ack", Message: m}, nil
			}
			break
		}
	}
}

// Backoff between reconnects of a Runner that Serve or a Reply makes.
const (
	minRunnerBackoff = 100 * time.Millisecond
	maxRunnerBackoff = 5 * time.Second
)

// reconnect replaces the lost connection old (redial), trying again with
// backoff until it connects, ctx ends, the runner is closed, or the server
// refuses the handshake for good (a 4xx but 429).
func (r *Runner) reconnect(ctx context.Context, old *runnerConn) (*runnerConn, error) {
	for wait := minRunnerBackoff; ; wait = min(2*wait, maxRunnerBackoff) {
		c, err := r.redial(ctx, old)
		if err == nil || fatal(err) || ctx.Err() != nil || errors.Is(err, ErrRunnerClosed) {
			return c, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// closeStatusError is the server's error for the close codes that end a
// runner for good, when its error frame was not read.
func closeStatusError(err error) *StatusError {
	switch websocket.CloseStatus(err) {
	case 4404:
		return &StatusError{Err: parley.Errorf(parley.ENOTFOUND, "the conversation was deleted")}
	case 4401:
		return &StatusError{Err: parley.Errorf(parley.EUNAUTHORIZED, "the token of this connection was revoked")}
	}
	return nil
}

// Reply writes the answer to one prompt for a Handler: Text, Tool and
// Finalize write to the answer's message, which the first of them creates
// (replying to the prompt, to its channel) unless Create made it already.
// Each call returns once the server made it durable, across reconnects;
// after the handler's ctx ends (an abort), each returns ctx's error at
// once and sends nothing. It is safe for concurrent use.
type Reply struct {
	// Prompt is the prompt being answered.
	Prompt Push

	r    *Runner
	wire context.Context // Serve's: the frames' context

	mu     sync.Mutex
	msg    string // the message open, "" if none
	text   int    // the bytes of text the server holds of msg
	retry  string // the failed message the next one retries
	closed bool   // the handler returned
	// cut is set once a write into the open message was refused with
	// turn_conflict: its turn was taken away (aborted), and the answer
	// ends as an aborted one.
	cut bool
}

// MessageID is the id of the answer's message open now ("" if none).
func (rp *Reply) MessageID() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.msg
}

// Create starts a message of the answer as o says: ReplyTo defaults to
// the prompt, Channel to the prompt's channel, and RetryOf to the message
// a Failover ended. Text, Tool and Finalize call it with no options when
// no message is open; call it yourself only for options. A message still
// open is finalized first (ending nothing: the next one follows it in the
// same turn).
func (rp *Reply) Create(ctx context.Context, o CreateOptions) error {
	return rp.with(ctx, func() error {
		if rp.msg != "" {
			if err := rp.finalize(rp.wire, FinalizeOptions{Finality: parley.FinalityNone}); err != nil {
				return err
			}
		}
		return rp.create(o)
	})
}

// Text appends a text delta to the answer.
func (rp *Reply) Text(ctx context.Context, delta string) error {
	return rp.with(ctx, func() error {
		if err := rp.open(); err != nil {
			return err
		}
		want := rp.text + len(delta)
		_, err := rp.r.deliver(rp.wire, map[string]any{"type": "message.part.text-delta", "turnId": rp.msg, "delta": delta}, rp.msg,
			func(m *parley.Message) bool { return m != nil && len(m.Content) >= want })
		if err == nil {
			rp.text = want
		}
		return err
	})
}

// Tool adds or updates a tool call of the answer.
func (rp *Reply) Tool(ctx context.Context, u ToolUpdate) error {
	return rp.with(ctx, func() error {
		if err := rp.open(); err != nil {
			return err
		}
		_, err := rp.r.deliver(rp.wire, toolFrame(rp.msg, u), rp.msg, func(m *parley.Message) bool {
			if m == nil {
				return false
			}
			for _, p := range m.Parts {
				if p.Type == parley.PartToolCall && p.CallID == u.CallID {
					return p.Status == u.Status && p.Error == u.Error
				}
			}
			return false
		})
		return err
	})
}

// Finalize ends the answer's message as o says (reason end_turn by
// default). Serve finalizes the message open when the handler returns:
// call it for another reason, a final text, or a finality (FinalityNone,
// so that another message follows in the same turn).
func (rp *Reply) Finalize(ctx context.Context, o FinalizeOptions) error {
	return rp.with(ctx, func() error {
		if err := rp.open(); err != nil {
			return err
		}
		return rp.finalize(rp.wire, o)
	})
}

// Failover ends the answer's message with an error part, keeping the
// runner's turn and its prompt: the next message (made by the next Text,
// Tool or Create) retries it, in the same turn, with RetryOf naming it.
func (rp *Reply) Failover(ctx context.Context, reason string) error {
	return rp.with(ctx, func() error {
		if err := rp.open(); err != nil {
			return err
		}
		failed := rp.msg
		err := rp.end(rp.wire, map[string]any{"type": "error", "turnId": failed, "error": reason, "finality": parley.FinalityNone})
		if err == nil {
			rp.retry = failed
		}
		return err
	})
}

// with runs fn under the lock, unless ctx ended or the handler returned.
func (rp *Reply) with(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.closed {
		return fmt.Errorf("the answer to prompt %s has ended: its handler returned", rp.Prompt.PromptID)
	}
	err := fn()
	if rp.msg != "" && parley.ErrorCode(err) == parley.ETURNCONFLICT {
		rp.cut = true
	}
	return err
}

// wasCut reports whether the answer's turn was taken away under it.
func (rp *Reply) wasCut() bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.cut
}

// close marks the handler returned: later calls fail.
func (rp *Reply) close() {
	rp.mu.Lock()
	rp.closed = true
	rp.mu.Unlock()
}

// open creates the answer's message unless one is open; rp.mu is held.
func (rp *Reply) open() error {
	if rp.msg != "" {
		return nil
	}
	return rp.create(CreateOptions{})
}

// create starts a new message with o's defaults filled in; rp.mu is held.
func (rp *Reply) create(o CreateOptions) error {
	if o.ReplyTo == "" {
		o.ReplyTo = rp.Prompt.PromptID
	}
	if o.Channel == nil {
		o.Channel = rp.Prompt.Channel
	}
	if o.RetryOf == "" {
		o.RetryOf = rp.retry
	}
	id := newMessageID()
	if _, err := rp.r.deliver(rp.wire, createFrame(id, o), id, func(m *parley.Message) bool { return m != nil }); err != nil {
		return err
	}
	rp.msg, rp.text, rp.retry = id, 0, ""
	return nil
}

// finalize ends the open message; rp.mu is held (or the handler returned).
func (rp *Reply) finalize(ctx context.Context, o FinalizeOptions) error {
	return rp.end(ctx, finalizeFrame(rp.msg, o))
}

// fail ends the answer with an error part, in a message of its own if none
// is open; rp.mu is held (or the handler returned).
func (rp *Reply) fail(ctx context.Context, text string) error {
	if rp.msg == "" {
		if err := rp.create(CreateOptions{}); err != nil {
			return err
		}
	}
	return rp.end(ctx, map[string]any{"type": "error", "turnId": rp.msg, "error": text})
}

// end sends a frame that ends the open message; rp.mu is held.
func (rp *Reply) end(ctx context.Context, frame map[string]any) error {
	_, err := rp.r.deliver(ctx, frame, rp.msg, func(m *parley.Message) bool { return m != nil && m.Status != parley.StatusStreaming })
	if err == nil {
		rp.msg, rp.text = "", 0
	}
	return err
}

// newMessageID makes the id of a message a Reply creates: a UUIDv7, so
// that ids sort by time as the server's own do.
func newMessageID() string {
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString()
}
