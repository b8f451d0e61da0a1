package wsconn

import (
	"bufio"
	"sync"

	"github.com/parleyhq/parley/internal/transport/netpoll"
)

// Serve reads the data messages the peer sends as they arrive and gives
// each to handle, in order, answering pings and noting pongs on the way.
// It returns at once. When handle returns false, the peer closes (a close
// frame, answered, or the end of the stream), a message is over the read
// limit or breaks the protocol (see Read), or the server closes the
// connection, reading stops and done is called once: with nil when handle
// asked to stop, ErrClosed when the peer or the server closed, or the
// error that ended the connection. handle and done are never called at
// the same time, and nothing is handed over once the server has closed the
// connection. A message's bytes are valid until handle returns.
//
// While the peer is silent nothing waits on the connection: a goroutine
// runs only while what arrived is read and handled (see package netpoll),
// and handle may block it (to hold back a peer that sends faster than it
// is answered). Where that cannot be (off Linux, over TLS, or for a
// connection whose client sent frames before its handshake was answered)
// one goroutine reads the connection for as long as it lasts. Serve (or
// Watch) is called once, instead of Read, by a connection's only reader.
func (c *Conn) Serve(handle func(msg []byte) bool, done func(error)) {
	c.serve(&watching{keep: true, handle: handle, done: done})
}

// Watch drains the connection in the background (pings are answered,
// pongs noted, data messages read past, a close frame answered), and
// calls gone once, with ErrClosed when the peer closed or the server
// closed the connection first, or with the error that ended it. It is
// Serve for a peer that has nothing to say but control frames, and holds
// no goroutine while the peer is silent in the same way.
func (c *Conn) Watch(gone func(error)) {
	c.serve(&watching{done: gone})
}

func (c *Conn) serve(w *watching) {
	w.c = c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.watch = w
	if c.closed {
		w.stopped = true
		go w.end(ErrClosed)
		return
	}
	if !c.early {
		// Under c.wmu, so that release finds the watch to stop.
		if p, ok := netpoll.Watch(c.conn, c.readPolled); ok {
			w.poll = p
			return
		}
	}
	w.running = true // for good: the goroutine ends it itself
	c.ownBuffer()
	go func() {
		for {
			if more, err := c.step(w); !more {
				w.end(err)
				return
			}
		}
	}()
}

// watching is the state of a connection Serve or Watch reads.
type watching struct {
	c *Conn
	// keep says whether data messages are kept and handed to handle, or
	// read past (Watch).
	keep   bool
	handle func(msg []byte) bool
	done   func(error)
	once   sync.Once
	// poll is the connection's netpoll watch (nil if a goroutine reads it).
	poll *netpoll.Watcher
	// fragmented says whether the peer began a data message it has not
	// ended, and msg holds what of it was read (if keep): frames are read
	// one at a time, by one goroutine after another.
	fragmented bool
	msg        []byte

	mu sync.Mutex
	// running is set while a goroutine reads (and handles) what arrived;
	// stopped once the server closed the connection. Whoever finds the
	// other not there calls done: the server's close if no goroutine
	// runs, else that goroutine once it has finished.
	running, stopped bool
}

// end calls done, once, and gives back the room of a message begun.
// Nobody reads the connection any more.
func (w *watching) end(err error) {
	w.once.Do(func() {
		w.c.giveRoom()
		w.done(err)
	})
}

// step reads one frame and hands over the message it ends, if kept. It
// reports whether to go on reading, and if not, why.
func (c *Conn) step(w *watching) (bool, error) {
	if c.ended.Load() {
		return false, ErrClosed
	}
	msg, fin, err := c.frame(w.keep, w.msg, &w.fragmented)
	if err != nil {
		return false, err
	}
	if !fin || !w.keep {
		w.msg = msg
		return !c.ended.Load(), nil
	}
	if c.ended.Load() {
		return false, ErrClosed // closed while it was read: nothing more is handed over
	}
	more := w.handle(msg)
	c.giveRoom()
	if cap(msg) <= LargeMessage { // a large message's buffer is let go
		w.msg = msg[:0]
	} else {
		w.msg = nil
	}
	if !more {
		return false, nil
	}
	return !c.ended.Load(), nil
}

// readPolled reads what arrived: one frame, and the rest of what the
// connection's own read buffer holds (no epoll sees that), then asks to
// hear of the next arrival.
func (c *Conn) readPolled() bool {
	w := c.watch
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false // done was called, or will be by unwatch's goroutine
	}
	w.running = true
	w.mu.Unlock()
	c.borrow()
	more, err := c.step(w)
	for more && buffered(c) {
		more, err = c.step(w)
	}
	// Empty now, unless reading ended: a frame is read whole, waiting for
	// the rest of it, and what follows it is read before the next wait.
	c.giveBack()
	w.mu.Lock()
	w.running = false
	if w.stopped {
		more, err = false, ErrClosed
	}
	w.mu.Unlock()
	if !more {
		w.end(err)
	}
	return more
}

// buffered reports whether c's read buffer holds bytes not read yet.
func buffered(c *Conn) bool {
	br, ok := c.r.(*bufio.Reader)
	return ok && br.Buffered() > 0
}

// unwatch stops reading a connection the server closes, and tells its
// reader's caller unless a goroutine reads it now (that one does, when it
// has finished); c.wmu is held, and c is marked ended.
func (c *Conn) unwatch() {
	w := c.watch
	if w == nil {
		return
	}
	w.poll.Stop()
	w.mu.Lock()
	w.stopped = true
	idle := !w.running
	w.mu.Unlock()
	if idle {
		go w.end(ErrClosed) // done is not called with c.wmu held
	}
}
