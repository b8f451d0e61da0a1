package wsconn

import (
	"sync"
	"syscall"
)

// watcher is the epoll instance that watches every idle connection (see
// Conn.Watch): a connection is added for one event at a time
// (EPOLLONESHOT), its frame is read by a goroutine started for it, which
// then arms it again. Every epoll_ctl runs inside the socket's
// RawConn.Control, so never on a descriptor closed (and perhaps reused)
// meanwhile: closing a socket takes it out of the epoll set.
var watcher = &epollWatcher{conns: map[int32]*Conn{}}

type epollWatcher struct {
	start sync.Once
	epfd  int // -1 if epoll could not be had
	mu    sync.Mutex
	conns map[int32]*Conn // by token
	next  int32
}

// events are what a watched connection is woken for: data (a frame, or the
// end of the stream) or the peer's hang-up.
const events = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// add watches c, unless its socket cannot be had (then it reports false,
// and the caller drains c with a goroutine).
func (e *epollWatcher) add(c *Conn) bool {
	e.start.Do(func() {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		e.epfd = fd
		if err != nil {
			e.epfd = -1
			return
		}
		go e.loop()
	})
	if e.epfd < 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.next++; e.next <= 0 {
			e.next = 1 // wrapped around: tokens are positive
		}
		if e.conns[e.next] == nil {
			break
		}
	}
	token := e.next
	if !e.ctl(c, syscall.EPOLL_CTL_ADD, token) {
		return false
	}
	c.watch.token = token
	e.conns[token] = c
	// A connection closed while it was added (release marks it ended
	// before it asks to be removed) is taken out again here.
	if c.ended.Load() {
		delete(e.conns, token)
		e.ctl(c, syscall.EPOLL_CTL_DEL, 0)
	}
	return true
}

// rearm asks for c's next event; false if c is closed.
func (e *epollWatcher) rearm(c *Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conns[c.watch.token] != c {
		return false
	}
	return e.ctl(c, syscall.EPOLL_CTL_MOD, c.watch.token)
}

// remove stops watching c.
func (e *epollWatcher) remove(c *Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conns[c.watch.token] == c {
		delete(e.conns, c.watch.token)
		e.ctl(c, syscall.EPOLL_CTL_DEL, 0)
	}
}

// ctl runs epoll_ctl on c's socket while the socket is open.
func (e *epollWatcher) ctl(c *Conn, op int, token int32) bool {
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var cerr error
	err = rc.Control(func(fd uintptr) {
		cerr = syscall.EpollCtl(e.epfd, op, int(fd), &syscall.EpollEvent{Events: events, Fd: token})
	})
	return err == nil && cerr == nil
}

// loop starts a reader for each connection that has something to read.
func (e *epollWatcher) loop() {
	evs := make([]syscall.EpollEvent, 256)
	for {
		n, err := syscall.EpollWait(e.epfd, evs, -1)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		e.mu.Lock()
		for _, ev := range evs[:n] {
			if c := e.conns[ev.Fd]; c != nil {
				go c.readWatched()
			}
		}
		e.mu.Unlock()
	}
}
