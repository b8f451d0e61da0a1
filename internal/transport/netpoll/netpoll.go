// Package netpoll tells when a connection that is idle most of the time
// has something to read, with no goroutine waiting on it meanwhile: a
// stream's client, which sends nothing (SSE) or little (a WebSocket's pings
// and close), would otherwise keep a goroutine parked in a read for the
// life of its connection, its stack resident and scanned by every garbage
// collection.
//
// On Linux one epoll set, served by one goroutine, watches every such
// socket; the set itself waits in Go's network poller, as a socket read
// by a goroutine would. Elsewhere (or where that poller would not take the
// set), and for a connection that is not a socket of its own (TLS), Watch
// reports that it cannot, and the caller reads with a goroutine as before.
package netpoll

import "net"

// Watch calls ready, on a goroutine of package gopool, once conn has
// something to read: data, or the end of the stream. If ready returns
// true, conn is watched again for what comes next; if false, no more.
// Calls of ready never overlap. It reports false, having done nothing, if
// conn cannot be watched.
//
// Stop must be called before conn is closed.
func Watch(conn net.Conn, ready func() (again bool)) (*Watcher, bool) {
	return watch(conn, ready)
}

// Watched returns how many connections are watched now.
func Watched() int { return watched() }

// Stop stops watching. It returns at once; a call of ready that began
// before goes on, and is not called again.
func (w *Watcher) Stop() {
	if w != nil {
		w.stop()
	}
}
