package api

import "sync"

// runner queue is what goes out on a runner connection, in order: frames the
// server pushes (prompts, aborts, reverts; nil closes the connection) and
// the answers to the runner's frames. It holds what waits, and nothing
// when nothing does. Pushes never block: past maxPushed waiting, the
// runner queue overflows and the connection is dropped (a runner that reads
// nothing). Answers block the reader past maxInFlight unanswered frames.
//
// No goroutine waits on an runner queue. Whatever makes something writable (a
// push, an answer becoming known, the reader leaving, the token cut off)
// kicks it, and if no writer runs, one is started: it writes what is ready,
// in order, and ends at the first answer not yet known (which kicks the
// runner queue again once it is). So a runner connection that is idle, or
// waiting for the disk, costs no writer goroutine.
type runnerQueue struct {
	mu       sync.Mutex
	items    []outItem
	pushed   int           // pushed frames waiting
	inFlight int           // answers not yet written
	room     chan struct{} // signaled when an answer is written
	closed   bool          // by the reader leaving, or an overflow
	writing  bool          // a writer runs
	over     bool          // the writer is done for good
	// writer writes what take returns, until it returns nothing; it is
	// started on a goroutine of its own.
	writer func()
	// kicked is kick as a func value, made once: each answer is asked to
	// call it, and a method value made for each would be an allocation.
	kicked func()
}

// outItem is a pushed frame or an answer.
type outItem struct {
	frame []byte
	reply *pendingReply
}

// maxPushed bounds the pushed frames waiting on a runner connection.
const maxPushed = 256

func newRunnerQueue() *runnerQueue {
	q := &runnerQueue{room: make(chan struct{}, 1)}
	q.kicked = q.kick
	return q
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// kick starts the writer unless it runs, or is done.
func (q *runnerQueue) kick() {
	q.mu.Lock()
	start := !q.writing && !q.over && q.writer != nil
	if start {
		q.writing = true
	}
	q.mu.Unlock()
	if start {
		go q.writer()
	}
}

// push queues a frame the server sends; nil asks to close.
func (q *runnerQueue) push(frame []byte) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if q.pushed >= maxPushed {
		q.closed = true // a runner that reads nothing: drop it
		q.items = nil
	} else {
		q.pushed++
		q.items = append(q.items, outItem{frame: frame})
	}
	q.mu.Unlock()
	q.kick()
}

// reply queues an answer, waiting while maxInFlight are unanswered. It
// reports false once the runner queue is closed.
func (q *runnerQueue) reply(r *pendingReply) bool {
	// Asked before the answer is queued: once queued, the writer may take
	// it (and Wait on it) at any moment.
	r.ack.OnReady(q.kicked)
	q.mu.Lock()
	for q.inFlight >= maxInFlight && !q.closed {
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.inFlight++
	q.items = append(q.items, outItem{reply: r})
	// It may have been known before it was queued, when a kick found
	// nothing to write. Asked under q.mu: once it is unlocked, the writer
	// may take the answer and Wait on it, and an Ack is for one goroutine
	// at a time.
	known := r.ready()
	q.mu.Unlock()
	if known {
		q.kick()
	}
	return true
}

// answered notes that an answer was written.
func (q *runnerQueue) answered() {
	q.mu.Lock()
	q.inFlight--
	q.mu.Unlock()
	signal(q.room)
}

// take returns, for the writer, the items at the head of the runner queue that
// can be written now: pushed frames and known answers, up to the first
// answer not yet known. With none, the writer is to end: done says it is
// done for good (the runner queue is closed and empty), and the runner queue will
// start a writer again when it is kicked unless done.
func (q *runnerQueue) take() (items []outItem, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for n < len(q.items) && (q.items[n].reply == nil || q.items[n].reply.ready()) {
		if q.items[n].reply == nil {
			q.pushed--
		}
		n++
	}
	if n > 0 {
		items, q.items = q.items[:n:n], q.items[n:]
		return items, false
	}
	q.writing = false
	if q.closed && len(q.items) == 0 {
		q.over = true
	}
	return nil, q.over
}

// end stops the runner queue for good: no writer is started again.
func (q *runnerQueue) end() {
	q.mu.Lock()
	q.over, q.closed, q.items = true, true, nil
	q.mu.Unlock()
	signal(q.room)
}

// close closes the runner queue: the writer stops once it has written what was
// queued, and a reader waiting for room goes.
func (q *runnerQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.room)
	q.kick()
}
