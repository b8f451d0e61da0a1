package wsconn

import (
	"sync"

	"github.com/parleyhq/parley/netpoll"
)

// Watch drains the connection in the background, as Drain does (pings are
// answered, pongs noted, data read past, a close frame answered), and
// calls gone once, with ErrClosed when the peer closed or the server
// closed the connection first, or with the error that ended it.
//
// While the peer is silent nothing waits on the connection: a goroutine
// runs only while a frame is read (see package netpoll). Where that cannot
// be (off Linux, over TLS, or for a connection whose client sent frames
// before its handshake was answered) a goroutine drains it. Watch is called
// once, instead of Read or Drain, by a connection's only reader.
func (c *Conn) Watch(gone func(error)) {
	w := &watching{gone: gone}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.watch = w
	if c.closed {
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
	go func() { w.end(c.Drain()) }()
}

// watching is the state of a connection Watch drains.
type watching struct {
	gone func(error)
	once sync.Once
	// poll is the connection's netpoll watch (nil if a goroutine drains it).
	poll *netpoll.Watcher
	// fragmented says whether the peer began a data message it has not
	// ended (frames are read one at a time, by one goroutine after another).
	fragmented bool
}

// end calls gone, once.
func (w *watching) end(err error) {
	w.once.Do(func() { w.gone(err) })
}

// readPolled reads the frame that arrived, and asks to hear of the next.
func (c *Conn) readPolled() bool {
	w := c.watch
	if c.ended.Load() {
		w.end(ErrClosed)
		return false
	}
	if _, _, err := c.frame(false, nil, &w.fragmented); err != nil {
		w.end(err)
		return false
	}
	return !c.ended.Load()
}

// unwatch stops watching a connection the server closes, and tells its
// watcher's caller; c.wmu is held, and c is marked ended.
func (c *Conn) unwatch() {
	w := c.watch
	if w == nil {
		return
	}
	w.poll.Stop()
	go w.end(ErrClosed) // gone is not called with c.wmu held
}
