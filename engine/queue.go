package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/store"
)

// The commands of one conversation are decided one append at a time, in
// the order they came, by a driver: a goroutine that works the
// conversation's queue while it holds anything. While an append is being
// written, the commands that come meanwhile wait in the queue; the
// streaming commands among them (text deltas and tool updates of a
// runner's message) are then decided together and written as one append,
// consecutive text deltas of one message as one chunk event. So a runner
// that sends faster than one commit per frame (it keeps several frames in
// flight) has its frames written in ever larger appends, not one commit
// per frame, and what is stored stays one event per delta at low rates.
// Every command is still decided on the state its predecessors left, and
// answered once what it wrote is durable.

// pending is a command waiting for its conversation's driver.
type pending struct {
	ctx     context.Context
	build   func(conv.State) (conv.Command, error)
	respond func(conv.Decision) (*store.Idempotency, error)
	// stream is set for a streaming command, which may share an append
	// with the streaming commands next to it.
	stream *streamCmd
	done   chan outcome
}

// streamCmd is a streaming command: a text delta (text set), or another
// change of a streaming message (with).
type streamCmd struct {
	messageID string
	text      *conv.StreamText
	with      func(conv.StreamLookups) conv.Command
}

// outcome is what a command came to.
type outcome struct {
	d   conv.Decision
	s   conv.State
	err error
}

// maxStreamBatch bounds the streaming commands decided into one append.
const maxStreamBatch = 256

// enqueue queues p behind the conversation's other commands and returns
// the channel its outcome comes on.
func (e *Engine) enqueue(id string, p *pending) <-chan outcome {
	p.done = make(chan outcome, 1)
	if e.isClosed() {
		p.done <- outcome{err: errClosed}
		return p.done
	}
	c := e.entry(id)
	c.qmu.Lock()
	c.queue = append(c.queue, p)
	start := !c.driving
	c.driving = true
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}: // a driver lingering for work takes it
	default:
	}
	if start {
		if !e.track() {
			e.fail(c, errClosed)
		} else {
			go e.drive(id, c)
		}
	}
	return p.done
}

// Ack is what a queued streaming command comes to, once it is known (see
// StreamTextAsync). One goroutine at a time may use it.
type Ack struct {
	done <-chan outcome
	got  bool
	res  *MessageResult
	err  error
}

// Acked returns an Ack that has its outcome already.
func Acked(res *MessageResult, err error) *Ack { return &Ack{got: true, res: res, err: err} }

// Ready reports whether the outcome is known: Wait would not wait.
func (a *Ack) Ready() bool { return a.got || len(a.done) > 0 }

// Wait waits for the outcome.
func (a *Ack) Wait() (*MessageResult, error) {
	if !a.got {
		o := <-a.done
		a.got = true
		if o.err != nil {
			a.err = o.err
		} else {
			r := o.d.Result
			a.res = &MessageResult{Message: r.Message, Seq: r.Seq, Turn: r.Turn, EndedPrompt: r.EndedPrompt}
		}
	}
	return a.res, a.err
}

// fail ends every command queued on c with err.
func (e *Engine) fail(c *conversation, err error) {
	c.qmu.Lock()
	q := c.queue
	c.queue, c.driving = nil, false
	c.qmu.Unlock()
	for _, p := range q {
		p.done <- outcome{err: err}
	}
}

// driverLinger is how long a driver waits for more work once its queue is
// empty: a runner streaming at full speed keeps its conversation's driver
// (and the stack it grew) instead of starting one per append.
const driverLinger = 20 * time.Millisecond

// drive works a conversation's queue until it has been empty for
// driverLinger: a run of streaming commands at its head as one append,
// any other command alone.
func (e *Engine) drive(id string, q *conversation) {
	defer e.wg.Done()
	var linger *time.Timer
	for {
		q.qmu.Lock()
		n := 0
		for n < len(q.queue) && n < maxStreamBatch && q.queue[n].stream != nil {
			n++
		}
		if n == 0 && len(q.queue) > 0 {
			n = 1
		}
		if n == 0 {
			q.qmu.Unlock()
			if linger == nil {
				linger = time.NewTimer(driverLinger)
			} else {
				linger.Reset(driverLinger)
			}
			select {
			case <-q.wake:
				linger.Stop()
				continue
			case <-e.done:
			case <-linger.C:
			}
			q.qmu.Lock()
			if len(q.queue) > 0 { // came as the timer fired
				q.qmu.Unlock()
				continue
			}
			q.driving = false
			q.qmu.Unlock()
			return
		}
		batch := q.queue[:n:n]
		q.queue = q.queue[n:]
		q.qmu.Unlock()
		if batch[0].stream == nil {
			e.decideOne(id, batch[0])
		} else if err := e.decideStreams(id, batch); err != nil {
			// The streaming commands queued behind a run that could not be
			// written were sent counting on it: they fail with it, so that
			// no runner's message goes on past a hole.
			q.qmu.Lock()
			var failed []*pending
			q.queue = slices.DeleteFunc(q.queue, func(p *pending) bool {
				if p.stream != nil {
					failed = append(failed, p)
				}
				return p.stream != nil
			})
			q.qmu.Unlock()
			for _, p := range failed {
				p.done <- outcome{err: err}
			}
		}
	}
}

// decideOne decides a command that is not streaming (or one alone).
func (e *Engine) decideOne(id string, p *pending) {
	if err := p.ctx.Err(); err != nil {
		p.done <- outcome{err: err}
		return
	}
	c, err := e.lockLoaded(p.ctx, id)
	if err != nil {
		p.done <- outcome{err: err}
		return
	}
	d, s, err := e.decideLocked(p.ctx, c, id, p.build, p.respond)
	c.mu.Unlock()
	p.done <- outcome{d, s, err}
}

// decideStreams decides a run of streaming commands on the state each
// leaves for the next, writes what they decided as one append, and
// answers each. Consecutive text deltas of one message (by one writer)
// are decided as one, their text joined: one chunk event. A refused
// command writes nothing and is answered at once; the others go on. If
// the append fails, every command of the run is answered with its error,
// which decideStreams returns. With other nodes writing, a run that meets
// a newer log is decided again on it; one that keeps meeting one is
// decided command by command, as decide does.
func (e *Engine) decideStreams(id string, batch []*pending) error {
	var live []*pending
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- outcome{err: err}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		for _, p := range live {
			p.done <- outcome{err: err}
		}
		return nil // nothing was written: a refusal, not a failed write
	}
	for attempt := 0; ; attempt++ {
		r := e.decideRun(ctx, c, id, live)
		var werr error
		if r.stale == nil && len(r.d.Events) > 0 {
			if werr = e.append(ctx, c, nil, c.state, r.next, r.d, nil); werr == nil {
				e.applied(c, id, r.next, r.d)
				r.answer(r.next, nil)
				c.mu.Unlock()
				return nil
			}
			c.streams = nil // the run's assemblies were never written: rebuild from the store
		}
		conflict := r.stale != nil || parley.ErrorCode(werr) == parley.ECONFLICT
		if conflict && attempt == 0 {
			// Another node wrote: catch up and decide the run again.
			if moved, cerr := e.catchUp(ctx, c, id); cerr == nil && moved {
				continue
			}
		}
		if conflict && e.opts.Shared {
			// Overtaken again: one at a time, each as decide does it.
			c.mu.Unlock()
			for _, p := range live {
				e.decideOne(id, p)
			}
			return nil
		}
		if r.stale != nil {
			werr = r.stale
		}
		if werr == nil {
			r.answer(c.state, nil) // refused, or wrote nothing
			c.mu.Unlock()
			return nil
		}
		if parley.ErrorCode(werr) == parley.EINTERNAL {
			e.resync(c, id)
		}
		r.answer(c.state, werr)
		c.mu.Unlock()
		return werr
	}
}

// run is a run of streaming commands decided together.
type run struct {
	next conv.State
	d    conv.Decision // what they all write: events, message rows, deliveries
	// results holds each command's outcome.
	results map[*pending]outcome
	order   []*pending
	// stale is set when a row read was newer than the state (another node
	// wrote): the run must be decided again.
	stale error
}

// answer sends each command its outcome: those whose decision writes the
// run's err, if not nil, else their own, with the state s after the run.
func (r *run) answer(s conv.State, err error) {
	for _, p := range r.order {
		o := r.results[p]
		if err != nil && o.err == nil && len(o.d.Events) > 0 {
			o = outcome{err: err}
		}
		o.s = s
		p.done <- o
	}
}

// decideRun decides the commands of a run on c's state, each on what the
// ones before it leave. c.mu must be held.
func (e *Engine) decideRun(ctx context.Context, c *conversation, id string, ps []*pending) *run {
	r := &run{next: c.state, results: make(map[*pending]outcome, len(ps)), order: ps}
	rows := map[string]int{} // message id → index in r.d.Messages, so that a later row of a message replaces an earlier
	env := e.env()
	for i := 0; i < len(ps); {
		p := ps[i]
		j := i + 1
		cmd := p.stream
		var delta []byte
		if cmd.text != nil {
			// Join the text deltas of this message that follow.
			delta = append(delta, cmd.text.Delta...)
			for j < len(ps) && ps[j].stream.text != nil && ps[j].stream.messageID == cmd.messageID && ps[j].stream.text.Actor == cmd.text.Actor {
				delta = append(delta, ps[j].stream.text.Delta...)
				j++
			}
		}
		d, err := e.decideStream(ctx, c, id, r.next, cmd, delta, env)
		if err != nil && j > i+1 && parley.ErrorCode(err) == parley.ETOOLARGE {
			j = i + 1 // joined, the text is too large: decide the first alone, the rest after it
			d, err = e.decideStream(ctx, c, id, r.next, cmd, []byte(cmd.text.Delta), env)
		}
		if errors.Is(err, errStale) {
			r.stale = err
			return r
		}
		for k := i; k < j; k++ {
			r.results[ps[k]] = outcome{d: d, err: err}
		}
		if err == nil && len(d.Events) > 0 {
			r.next = conv.Evolve(r.next, d.Events...)
			r.d.Events = append(r.d.Events, d.Events...)
			r.d.Deliveries = append(r.d.Deliveries, d.Deliveries...)
			for _, m := range d.Messages {
				if at, ok := rows[m.ID]; ok {
					r.d.Messages[at] = m
				} else {
					rows[m.ID] = len(r.d.Messages)
					r.d.Messages = append(r.d.Messages, m)
				}
			}
			c.remember(d.Result.Message) // the next command's assembly
			r.d.Result = d.Result
		}
		i = j
	}
	return r
}

// decideStream decides one streaming command (a text delta with text
// delta, if joined) on s. c.mu must be held.
func (e *Engine) decideStream(ctx context.Context, c *conversation, id string, s conv.State, cmd *streamCmd, delta []byte, env conv.Env) (conv.Decision, error) {
	m, err := e.assembled(ctx, id, cmd.messageID, s)
	if err != nil {
		return conv.Decision{}, err
	}
	var command conv.Command
	if cmd.text != nil {
		t := *cmd.text
		t.Delta, t.Known = string(delta), conv.StreamLookups{Message: m}
		command = t
	} else {
		command = cmd.with(conv.StreamLookups{Message: m})
	}
	if err := conv.Authorize(s, command); err != nil {
		return conv.Decision{}, err
	}
	return conv.Decide(s, command, env)
}
