// Package connlimit bounds the connections an HTTP server holds open, in
// all and per client address, so that clients that open connections and
// send nothing (or send slowly) cannot take every file descriptor of the
// process and leave the server unable to accept anyone (accept4: too many
// open files), nor all the memory the connections cost.
//
// At a bound it makes room the way a proxy does, by closing an idle
// connection rather than refusing the newcomer: a connection that waits for
// its first request or its next one, or whose request's headers are still
// arriving. Of those it closes first the connections of clients it does not
// know (that never sent a request with a valid token: see Known), those
// that have sent nothing of a request before those whose request is
// arriving, the oldest first; at the bound of one address, only that
// address's. A connection at work (a request being answered, a stream, a
// WebSocket) is never closed to make room. When nothing is idle, the
// newcomer is answered with Options.Refusal and closed.
//
// Use it as the server's listener, with the server's ConnState and
// ConnContext hooks set to the Listener's.
package connlimit

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Listener.
type Options struct {
	// Max bounds the connections open at once, in all (at least 1).
	Max int
	// MaxPerAddr bounds the connections of one client address (an IPv4
	// address, or an IPv6 /64 prefix, which one client may fill); 0 is
	// Max.
	MaxPerAddr int
	// Refusal and RefusalPerAddr are written, whole, to a connection
	// refused because the server, or its address, holds as many
	// connections as it may and none of them is idle: an HTTP response.
	Refusal, RefusalPerAddr []byte
}

// Listener is a net.Listener that bounds the connections it accepted that
// are still open. It is safe for concurrent use.
type Listener struct {
	net.Listener
	opts Options

	mu    sync.Mutex
	open  int
	addrs map[string]*addr
	// idle holds the idle connections by class, oldest first.
	idle    [classes]list
	nIdle   int
	shed    atomic.Int64
	refused atomic.Int64
}

// addr is one client address's connections.
type addr struct {
	open int
	idle [classes]list
}

// The classes of idle connections, in the order they are closed to make
// room: a client not known before a known one, and one that has sent
// nothing of its next request before one whose request is arriving.
const (
	unknownWaiting = iota
	unknownReading
	knownWaiting
	knownReading
	classes
)

// New returns a Listener over ln.
func New(ln net.Listener, opts Options) *Listener {
	if opts.Max < 1 {
		opts.Max = 1
	}
	if opts.MaxPerAddr <= 0 || opts.MaxPerAddr > opts.Max {
		opts.MaxPerAddr = opts.Max
	}
	return &Listener{Listener: ln, opts: opts, addrs: make(map[string]*addr)}
}

// Accept waits for a connection it can hold and returns it, idle: an idle
// connection is closed to make room for it if need be, and one that finds
// nothing idle to close is answered with the refusal and closed.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: nc, l: l, key: addrKey(nc.RemoteAddr())}
		c.links[0].c, c.links[1].c = c, c
		victim, refusal := l.admit(c)
		if victim != nil {
			l.shed.Add(1)
			_ = victim.Conn.Close()
		}
		if refusal == nil {
			return c, nil
		}
		l.refused.Add(1)
		_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = nc.Write(refusal)
		_ = nc.Close()
	}
}

// admit makes room for c and records it, idle; or says what to refuse it
// with. It returns the connection closed to make room, taken out already.
func (l *Listener) admit(c *Conn) (victim *Conn, refusal []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[c.key]
	full := l.open >= l.opts.Max
	switch {
	case a != nil && a.open >= l.opts.MaxPerAddr:
		// Room is made from the address's own, whether or not the server
		// is full too.
		if victim = oldest(&a.idle); victim == nil && full {
			return nil, l.opts.Refusal
		} else if victim == nil {
			return nil, l.opts.RefusalPerAddr
		}
	case full:
		if victim = oldest(&l.idle); victim == nil {
			return nil, l.opts.Refusal
		}
	}
	if victim != nil {
		l.forgetLocked(victim)
		a = l.addrs[c.key] // gone if the victim was its last
	}
	if a == nil {
		a = &addr{}
		l.addrs[c.key] = a
	}
	c.a = a
	c.registered = true
	a.open++
	l.open++
	c.fresh.Store(true)
	l.idleLocked(c, unknownWaiting)
	return victim, nil
}

// oldest returns the oldest idle connection of the first class that has
// one, or nil.
func oldest(idle *[classes]list) *Conn {
	for i := range idle {
		if c := idle[i].front(); c != nil {
			return c
		}
	}
	return nil
}

// idleLocked files c, busy before, as idle in class k.
func (l *Listener) idleLocked(c *Conn, k int) {
	c.class = k
	c.idle = true
	l.idle[k].pushBack(&c.links[0])
	c.a.idle[k].pushBack(&c.links[1])
	l.nIdle++
}

// busyLocked takes c out of the idle connections, if it is one.
func (l *Listener) busyLocked(c *Conn) {
	if !c.idle {
		return
	}
	l.idle[c.class].remove(&c.links[0])
	c.a.idle[c.class].remove(&c.links[1])
	c.idle = false
	l.nIdle--
}

// forgetLocked takes c out of the open connections (it is being closed).
func (l *Listener) forgetLocked(c *Conn) {
	if !c.registered {
		return
	}
	l.busyLocked(c)
	c.registered = false
	l.open--
	if c.a.open--; c.a.open == 0 {
		delete(l.addrs, c.key)
	}
}

// ConnState is the http.Server's ConnState hook: it tells which
// connections are idle (new, or between requests) and which are at work
// (a request being answered, or taken over by a stream or a WebSocket).
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*Conn)
	if !ok || c.l != l {
		return
	}
	switch state {
	case http.StateActive, http.StateHijacked:
		l.mu.Lock()
		l.busyLocked(c)
		l.mu.Unlock()
	case http.StateIdle:
		k := unknownWaiting
		if c.known.Load() {
			k = knownWaiting
		}
		c.fresh.Store(true)
		l.mu.Lock()
		if c.registered {
			l.busyLocked(c)
			l.idleLocked(c, k)
		}
		l.mu.Unlock()
	}
}

// reading moves c, idle, to the connections whose request is arriving:
// bytes of it were read.
func (l *Listener) reading(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.idle && (c.class == unknownWaiting || c.class == knownWaiting) {
		k := c.class + 1
		l.busyLocked(c)
		l.idleLocked(c, k)
	}
}

// connKey is the context key of the connection a request came on.
type connKey struct{}

// ConnContext is the http.Server's ConnContext hook: it gives each
// request's context its connection, for Known.
func (l *Listener) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*Conn); ok && c.l == l {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Known records that the client of the connection a request came on (its
// context) is known: it sent a valid token. Its connection is then closed
// to make room only once no unknown client's idle connection is left.
func Known(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*Conn); ok && !c.known.Load() {
		c.known.Store(true)
	}
}

// Stats are a Listener's counts.
type Stats struct {
	// Open and Idle count the connections open now, and of those the idle
	// ones.
	Open, Idle int
	// Shed counts the idle connections closed to make room, Refused the
	// connections refused for want of any.
	Shed, Refused int64
}

// Stats returns the Listener's counts now.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Idle: l.nIdle, Shed: l.shed.Load(), Refused: l.refused.Load()}
}

// addrKey is the address a connection's client is counted under: its IP,
// or for IPv6 its /64 prefix.
func addrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
