package api

import "sync"

// outbox is what goes out on a runner connection, in order: frames the
// server pushes (prompts, aborts, reverts; nil closes the connection) and
// the answers to the runner's frames. It holds what waits, and nothing
// when nothing does. Pushes never block: past maxPushed waiting, the
// outbox overflows and the connection is dropped (a runner that reads
// nothing). Answers block the reader past maxInFlight unanswered frames.
type outbox struct {
	mu       sync.Mutex
	items    []outItem
	pushed   int // pushed frames waiting
	inFlight int // answers not yet written
	wake     chan struct{}
	room     chan struct{} // signaled when an answer is written
	closed   bool          // by the reader leaving, or an overflow
}

// outItem is a pushed frame or an answer.
type outItem struct {
	frame []byte
	reply *pendingReply
}

// maxPushed bounds the pushed frames waiting on a runner connection.
const maxPushed = 256

func newOutbox() *outbox {
	return &outbox{wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push queues a frame the server sends; nil asks to close.
func (q *outbox) push(frame []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.pushed >= maxPushed {
		q.closed = true // a runner that reads nothing: drop it
		q.items = nil
		signal(q.wake)
		return
	}
	q.pushed++
	q.items = append(q.items, outItem{frame: frame})
	signal(q.wake)
}

// reply queues an answer, waiting while maxInFlight are unanswered. It
// reports false once the outbox is closed.
func (q *outbox) reply(r *pendingReply) bool {
	q.mu.Lock()
	for q.inFlight >= maxInFlight && !q.closed {
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.inFlight++
	q.items = append(q.items, outItem{reply: r})
	signal(q.wake)
	return true
}

// answered notes that an answer was written.
func (q *outbox) answered() {
	q.mu.Lock()
	q.inFlight--
	q.mu.Unlock()
	signal(q.room)
}

// take waits for what is queued and returns it all; false once the
// outbox is closed, or when cut is closed.
func (q *outbox) take(cut <-chan struct{}) ([]outItem, bool) {
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		for _, it := range items {
			if it.reply == nil {
				q.pushed--
			}
		}
		q.mu.Unlock()
		if len(items) > 0 {
			return items, true
		}
		if closed {
			return nil, false
		}
		select {
		case <-q.wake:
		case <-cut:
			return nil, false
		}
	}
}

// close closes the outbox: the writer stops once it has written what was
// queued... and a reader waiting for room goes.
func (q *outbox) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.wake)
	signal(q.room)
}
