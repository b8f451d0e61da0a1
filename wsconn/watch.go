package wsconn

import "sync"

// Watch drains the connection in the background, as Drain does (pings are
// answered, pongs noted, data read past, a close frame answered), and
// calls gone once, with ErrClosed when the peer closed or the server
// closed the connection first, or with the error that ended it.
//
// While the peer is silent nothing waits on the connection: on Linux one
// epoll watcher serves every watched connection and a goroutine runs only
// while a frame is read (elsewhere, and for a connection whose client sent
// frames before its handshake was answered, a goroutine drains it).
// Watch is called once, instead of Read or Drain, by a connection's only
// reader.
func (c *Conn) Watch(gone func(error)) {
	w := &watching{gone: gone}
	c.wmu.Lock()
	c.watch = w
	closed := c.closed
	c.wmu.Unlock()
	if closed {
		w.end(ErrClosed)
		return
	}
	if !c.early && watcher.add(c) {
		return
	}
	go func() { w.end(c.Drain()) }()
}

// watching is the state of a connection Watch drains.
type watching struct {
	gone func(error)
	once sync.Once
	// fragmented says whether the peer began a data message it has not
	// ended (frames are read one at a time, by one goroutine after another).
	fragmented bool
	// token names the connection to the epoll watcher (0: not added).
	token int32
}

// end calls gone, once.
func (w *watching) end(err error) {
	w.once.Do(func() { w.gone(err) })
}

// readWatched reads the one frame the epoll watcher saw arrive, and asks
// to be told of the next; it is run by a goroutine of its own, one at a
// time for a connection.
func (c *Conn) readWatched() {
	w := c.watch
	if c.ended.Load() {
		w.end(ErrClosed)
		return
	}
	if _, _, err := c.frame(false, nil, &w.fragmented); err != nil {
		w.end(err)
		return
	}
	if c.ended.Load() || !watcher.rearm(c) {
		w.end(ErrClosed)
	}
}

// unwatch stops watching a connection the server closes, and tells its
// watcher's caller; c.wmu is held, and c is marked ended.
func (c *Conn) unwatch() {
	w := c.watch
	if w == nil {
		return
	}
	watcher.remove(c)
	go w.end(ErrClosed) // gone is not called with c.wmu held
}
