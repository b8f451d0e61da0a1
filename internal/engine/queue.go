package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// The commands of one conversation are decided one append at a time, in
// the order they came: they queue, and the turn passes down the queue.
// While an append is being written, the commands that come meanwhile
// wait; the streaming commands among them (text deltas and tool updates
// of a runner's message) are then decided together and written as one
// append, consecutive text deltas of one message as one chunk event. So a
// runner that sends faster than one commit per frame (it keeps several
// frames in flight) has its frames written in ever larger appends, not one
// commit per frame, and what is stored stays one event per delta at low
// rates. Every command is still decided on the state its predecessors
// left, and answered once what it wrote is durable.
//
// A command whose caller waits for it (decide) is decided and written on
// its caller's goroutine when its turn comes. A run of streaming commands,
// whose callers go on without waiting (StreamTextAsync), is decided by one
// of a few workers, which hands the append to the store without waiting
// for it (Store.AppendAsync); its outcome comes back to a worker, which
// answers the run and passes the turn on. So no goroutine waits on the
// disk for a runner, and none exists per conversation.

// commandQueue gives the commands of each conversation their turn, as
// above: it keeps the queues (conversation.queue), decides the runs of
// streaming commands on its workers and hands their appends to the store.
// What a command is decided on (a conversation's state, under its lock)
// and what follows a durable append (the state evolved, the events
// published) are the engine's.
type commandQueue struct {
	e       *Engine
	store   store.Store
	metrics *Metrics
	shared  bool // other nodes write into the store too (Options.Shared)
	workers workers
}

// pending is a command waiting for its turn.
type pending struct {
	ctx     context.Context
	build   func(conv.State) (conv.Command, error)
	respond func(conv.Decision) (*store.Idempotency, error)
	// stream is set for a streaming command, which may share an append
	// with the streaming commands next to it.
	stream *streamCmd
	// turn is closed when a waiting caller's command has the turn.
	turn chan struct{}
	// res and err are what the command came to, set before told becomes
	// notifyDone: all a streaming command's Ack tells (its events and the
	// state it left are not kept for it).
	res conv.Result
	err error
	// lean drops the message from the outcome (StreamTextAsync).
	lean bool
	// notify, if set (Ack.OnReady), is called once the outcome is known;
	// told says whether it is set, or the outcome given.
	notify func()
	told   atomic.Int32
	// wake is closed when the outcome is given, made only for a caller
	// that waits for it (wait): a runner's frames are answered through
	// notify, and a channel for each would be one more allocation for
	// every frame in flight. mu guards it.
	mu   sync.Mutex
	wake chan struct{}
}

// The states of pending.told.
const (
	notifyNone  = iota // nothing asked to be told
	notifyAsked        // notify is set
	notifyDone         // the outcome is given
)

// answer gives p its outcome.
func (p *pending) answer(o outcome) { p.settle(o.d.Result, o.err) }

// settle gives p its outcome, wakes whoever waits for it, and calls its
// notify, if any.
func (p *pending) settle(res conv.Result, err error) {
	if p.lean {
		res.Message = nil
	}
	p.res, p.err = res, err
	p.mu.Lock()
	told := p.told.Swap(notifyDone)
	if p.wake != nil {
		close(p.wake)
	}
	p.mu.Unlock()
	if told == notifyAsked {
		p.notify()
	}
}

// settled reports whether p has its outcome.
func (p *pending) settled() bool { return p.told.Load() == notifyDone }

// wait returns once p has its outcome.
func (p *pending) wait() {
	if p.settled() {
		return
	}
	p.mu.Lock()
	if p.settled() {
		p.mu.Unlock()
		return
	}
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	wake := p.wake
	p.mu.Unlock()
	<-wake
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

// enqueue queues p behind the conversation's other commands, and gives it
// the turn at once if the conversation has none under way. It returns the
// conversation its queue is on.
func (cq *commandQueue) enqueue(id string, p *pending) *conversation {
	if cq.e.isClosed() {
		p.answer(outcome{err: errClosed})
		if p.turn != nil {
			close(p.turn)
		}
		return nil
	}
	c := cq.e.entry(id)
	c.qmu.Lock()
	c.queue = append(c.queue, p)
	idle := !c.driving
	c.driving = true
	c.qmu.Unlock()
	if idle {
		cq.start(id, c)
	}
	return c
}

// next gives the turn to the head of q's queue (its turn is taken by the
// caller): a waiting caller's command, or a run of streaming commands,
// which it decides itself (it waits on nothing: the append goes to the
// store without waiting). With nothing queued, the conversation has no
// turn under way.
func (cq *commandQueue) next(id string, q *conversation) {
	q.qmu.Lock()
	if len(q.queue) == 0 {
		q.driving = false
		q.qmu.Unlock()
		return
	}
	if q.queue[0].stream == nil {
		p := q.queue[0]
		q.queue = q.queue[1:]
		q.qmu.Unlock()
		close(p.turn) // its caller decides it, then passes the turn
		return
	}
	n := 1
	for n < len(q.queue) && n < maxStreamBatch && q.queue[n].stream != nil {
		n++
	}
	batch := q.queue[:n:n]
	q.queue = q.queue[n:]
	q.qmu.Unlock()
	cq.decideStreams(id, q, batch, 0)
}

// start gives the turn of an idle conversation to the head of its queue:
// a run of streaming commands goes to a worker rather than being decided
// on the goroutine that queued it (a runner's reader), so that the frames
// read meanwhile join it.
func (cq *commandQueue) start(id string, q *conversation) {
	q.qmu.Lock()
	stream := len(q.queue) > 0 && q.queue[0].stream != nil
	q.qmu.Unlock()
	if stream {
		cq.workers.add(func() { cq.next(id, q) })
		return
	}
	cq.next(id, q)
}

// decideOne decides a command that is not streaming, on its caller's
// goroutine, when its turn has come. A command whose conversation is
// found gone while it is decided (deleted on another node, and perhaps
// made again under its id) is decided once more on what the store holds
// now: ENOTFOUND, or the conversation made again.
func (cq *commandQueue) decideOne(id string, p *pending) outcome {
	for again := true; ; again = false {
		if err := p.ctx.Err(); err != nil {
			return outcome{err: err}
		}
		c, err := cq.e.lockLoaded(p.ctx, id)
		if err != nil {
			return outcome{err: err}
		}
		build := p.build
		if build == nil {
			build = cq.streamBuild(p.ctx, id, p.stream)
		}
		d, s, err := cq.e.decideLocked(p.ctx, c, id, build, p.respond)
		dropped := c.dropped
		c.mu.Unlock()
		if !dropped || !again {
			return outcome{d, s, err}
		}
	}
}

// streamBuild returns the build function of a streaming command decided
// on its own, as a caller's command is (a run retried one by one).
func (cq *commandQueue) streamBuild(ctx context.Context, convID string, cmd *streamCmd) func(conv.State) (conv.Command, error) {
	return func(s conv.State) (conv.Command, error) {
		m, err := cq.e.assembled(ctx, convID, cmd.messageID, s)
		if cmd.text != nil {
			t := *cmd.text
			t.Known = conv.StreamLookups{Message: m}
			return t, err
		}
		return cmd.with(conv.StreamLookups{Message: m}), err
	}
}

// decideStreams decides a run of streaming commands on the state each
// leaves for the next, hands what they decided to the store as one
// append, and answers each once it is durable (writeDone). Consecutive
// text deltas of one message (by one writer) are decided as one, their
// text joined: one chunk event. A refused command writes nothing and is
// answered at once; the others go on. It runs on a worker.
func (cq *commandQueue) decideStreams(id string, q *conversation, batch []*pending, attempt int) {
	var live []*pending
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.answer(outcome{err: err})
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		cq.next(id, q)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cq.e.lockLoaded(ctx, id)
	if err != nil {
		for _, p := range live {
			p.answer(outcome{err: err})
		}
		cq.next(id, q)
		return
	}
	r := cq.decideRun(ctx, c, id, live)
	if r.stale != nil {
		c.mu.Unlock()
		cq.retryStreams(id, q, live, attempt, r.stale)
		return
	}
	if len(r.d.Events) == 0 {
		r.answer(nil) // refused, or wrote nothing
		c.mu.Unlock()
		cq.next(id, q)
		return
	}
	p, snapshot, err := c.appendParams(c.state, r.next, r.d, nil)
	if err != nil {
		r.answer(err)
		c.mu.Unlock()
		q.failStreams(err)
		cq.next(id, q)
		return
	}
	if !cq.e.track() { // Close waits for the outcome
		r.answer(errClosed)
		c.mu.Unlock()
		cq.next(id, q)
		return
	}
	c.mu.Unlock()
	start := time.Now()
	// A store that tells the commit before the sync (Committed) has the
	// run published, and the turn passed on, at the commit; the run's
	// commands are answered once it is durable. once makes the run the
	// conversation's exactly once, whichever of the two comes first to a
	// worker. An answer that finds the run made the conversation's already
	// is given at once, on the store's goroutine (answering blocks on
	// nothing), rather than waking a worker for it.
	var (
		once      sync.Once
		committed atomic.Bool
		applied   atomic.Bool
		deleted   error
	)
	visible := func() {
		deleted = cq.committed(id, q, c, r, snapshot, false)
		applied.Store(true)
	}
	p.Committed = func() {
		committed.Store(true)
		cq.workers.add(func() { once.Do(visible) })
	}
	answer := func(err error) {
		if err == nil {
			err = deleted
		}
		r.answer(err)
	}
	cq.store.AppendAsync(p, func(err error) {
		cq.metrics.observeAppend(len(r.d.Events), time.Since(start), err)
		if applied.Load() {
			answer(err)
			cq.e.wg.Done()
			return
		}
		cq.workers.add(func() {
			defer cq.e.wg.Done()
			if committed.Load() {
				once.Do(visible)
				answer(err)
				return
			}
			cq.writeDone(id, q, c, r, snapshot, live, attempt, err)
		})
	})
}

// committed makes a run whose append is committed the conversation's: its
// state becomes the conversation's, its events are published, and the turn
// passes on. With durable set the append is durable too, and the run's
// commands are answered before the turn passes; else they are answered
// once it is (decideStreams), with what committed returns: nil, or the
// error that the conversation was deleted while the append was written
// (then none of it is the conversation's).
func (cq *commandQueue) committed(id string, q *conversation, c *conversation, r *run, snapshot bool, durable bool) error {
	c.mu.Lock()
	if c.dropped {
		c.mu.Unlock()
		err := errDeleted(id) // none of it is the store's now
		if durable {
			r.answer(err)
		}
		q.failStreams(err)
		cq.next(id, q)
		return err
	}
	if snapshot {
		c.snapshot = r.next.LastSeq
	}
	for _, m := range r.streams {
		c.remember(m) // the run's assemblies, committed now
	}
	cq.e.applied(c, id, r.next, r.d)
	if durable {
		r.answer(nil)
	}
	c.mu.Unlock()
	cq.next(id, q)
	return nil
}

// writeDone takes the outcome of a run's append: on success the run's
// state becomes the conversation's, its events are published and its
// commands answered; on failure its commands, and the streaming commands
// queued behind it, fail with the error. Then the turn passes on. It runs
// on a worker.
func (cq *commandQueue) writeDone(id string, q *conversation, c *conversation, r *run, snapshot bool, live []*pending, attempt int, err error) {
	if err == nil {
		cq.committed(id, q, c, r, snapshot, true)
		return
	}
	c.mu.Lock()
	if parley.ErrorCode(err) == parley.ENOTFOUND && !c.dropped {
		cq.e.drop(c, id) // deleted on another node
	}
	if parley.ErrorCode(err) == parley.ECONFLICT {
		c.mu.Unlock()
		cq.retryStreams(id, q, live, attempt, err) // another node wrote first
		return
	}
	if parley.ErrorCode(err) == parley.EINTERNAL {
		cq.e.resync(c, id)
	}
	r.answer(err)
	c.mu.Unlock()
	q.failStreams(err)
	cq.next(id, q)
}

// retryStreams decides a run again that met a newer log (another node
// wrote): once more as a run, after catching up; then command by command,
// as decide does it.
func (cq *commandQueue) retryStreams(id string, q *conversation, live []*pending, attempt int, cause error) {
	if attempt == 0 && cq.shared {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := cq.e.lockLoaded(ctx, id) // catches up to the log's head
		if err == nil {
			c.mu.Unlock()
		}
		cancel()
		cq.decideStreams(id, q, live, 1)
		return
	}
	if !cq.shared {
		for _, p := range live {
			p.answer(outcome{err: cause})
		}
		q.failStreams(cause)
		cq.next(id, q)
		return
	}
	for _, p := range live {
		p.answer(cq.decideOne(id, p))
	}
	cq.next(id, q)
}

// failStreams fails the streaming commands queued on q with err: they were
// sent counting on a run that could not be written, so that no runner's
// message goes on past a hole.
func (q *conversation) failStreams(err error) {
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
		p.answer(outcome{err: err})
	}
}

// Ack is what a queued streaming command comes to, once it is known (see
// StreamTextAsync). One goroutine at a time may use it.
type Ack struct {
	p   *pending
	got bool
	res *MessageResult // &result, or nil
	err error
	// result holds the outcome Wait returns, in the Ack itself: an Ack
	// is made with its command (queuedStream), so this makes nothing more.
	result MessageResult
}

// Acked returns an Ack that has its outcome already.
func Acked(res *MessageResult, err error) *Ack { return &Ack{got: true, res: res, err: err} }

// Ready reports whether the outcome is known: Wait would not wait.
func (a *Ack) Ready() bool {
	return a.got || a.p.settled()
}

// OnReady calls fn once the outcome is known: at once if it is, else on
// the goroutine that learns it, which fn must not block. Call it at most
// once, before Wait.
func (a *Ack) OnReady(fn func()) {
	if a.got {
		fn()
		return
	}
	p := a.p
	p.notify = fn
	if !p.told.CompareAndSwap(notifyNone, notifyAsked) {
		fn() // answered already
	}
}

// Wait waits for the outcome.
func (a *Ack) Wait() (*MessageResult, error) {
	if !a.got {
		a.p.wait()
		r, err := a.p.res, a.p.err
		a.got, a.p = true, nil
		if err != nil {
			a.err = err
		} else {
			a.result = MessageResult{Message: r.Message, Seq: r.Seq, Turn: r.Turn, EndedPrompt: r.EndedPrompt}
			a.res = &a.result
		}
	}
	return a.res, a.err
}
