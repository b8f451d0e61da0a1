package connlimit

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
)

// Conn is a connection a Listener accepted. It passes through what the
// socket offers beyond net.Conn (its descriptor, for epoll; CloseWrite;
// ReadFrom, for sendfile).
type Conn struct {
	net.Conn
	l   *Listener
	key string // its address's, in Listener.addrs
	// fresh is set while it is idle and nothing of a request was read
	// since; known once its client sent a valid token (see Known).
	fresh, known atomic.Bool

	// Guarded by l.mu: a is its address's counts; registered says it is
	// counted (not closed, nor closed to make room); idle whether it is
	// filed among the idle connections, in class; links file it there, in
	// the Listener's list and in its address's.
	a          *addr
	registered bool
	idle       bool
	class      int
	links      [2]link
}

// Read reads from the connection. The first bytes of a request read on
// an idle connection move it to those whose request is arriving.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.fresh.Load() {
		c.fresh.Store(false)
		c.l.reading(c)
	}
	return n, err
}

// Close closes the connection, which stops counting.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// errNotSocket is what SyscallConn returns for a connection that is not a
// socket of its own.
var errNotSocket = errors.New("connlimit: the connection has no descriptor of its own")

// SyscallConn returns the socket's raw connection (see syscall.Conn).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNotSocket
}

// CloseWrite shuts down the writing side of the socket, if it can.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNotSocket
}

// ReadFrom writes what r holds to the connection, with the socket's own
// ReadFrom (sendfile, splice) where it has one.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// link files a connection in a list.
type link struct {
	prev, next *link
	c          *Conn
}

// list is a list of connections, oldest first, that files them in their
// own links: moving one allocates nothing. The zero value is empty.
type list struct {
	root link // root.next is the front; the zero value is lazily made a ring
}

func (l *list) lazyInit() {
	if l.root.next == nil {
		l.root.next, l.root.prev = &l.root, &l.root
	}
}

// pushBack files e last.
func (l *list) pushBack(e *link) {
	l.lazyInit()
	e.prev, e.next = l.root.prev, &l.root
	e.prev.next, l.root.prev = e, e
}

// remove takes e, filed in l, out.
func (l *list) remove(e *link) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// front returns the connection filed first, or nil.
func (l *list) front() *Conn {
	if l.root.next == nil || l.root.next == &l.root {
		return nil
	}
	return l.root.next.c
}
