package netpoll

import (
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/parleyhq/parley/internal/gopool"
)

// Watcher is one connection's watch.
type Watcher struct {
	rc    syscall.RawConn
	ready func() bool
	token int32
}

// set is the epoll instance of the process. A socket is in it for one
// event at a time (EPOLLONESHOT); the goroutine given the event (a reused
// one, see package gopool) arms
// it again after ready. Every epoll_ctl runs inside the socket's
// RawConn.Control, so never on a descriptor closed (and perhaps reused)
// meanwhile, and closing a socket takes it out of the set.
var set = struct {
	start   sync.Once
	epfd    int      // -1 if epoll could not be had, or not in Go's poller
	file    *os.File // epfd as a file, in Go's network poller (see pollable)
	mu      sync.Mutex
	watches map[int32]*Watcher // by token
	next    int32
}{watches: map[int32]*Watcher{}}

// events are what a watched socket is woken for: data (or the end of the
// stream), or the peer's hang-up.
const events = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

func watch(conn net.Conn, ready func() bool) (*Watcher, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	set.start.Do(func() {
		set.epfd = -1
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		if epoll, ok := pollable(fd); ok {
			set.epfd = fd
			go loop(epoll)
		}
	})
	if set.epfd < 0 {
		return nil, false
	}
	w := &Watcher{rc: rc, ready: ready}
	set.mu.Lock()
	defer set.mu.Unlock()
	for {
		if set.next++; set.next <= 0 {
			set.next = 1 // wrapped around: tokens are positive
		}
		if set.watches[set.next] == nil {
			break
		}
	}
	w.token = set.next
	if !w.ctl(syscall.EPOLL_CTL_ADD) {
		return nil, false
	}
	set.watches[w.token] = w
	return w, true
}

// rearm watches w again; false if it was stopped or its socket closed.
func (w *Watcher) rearm() bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.watches[w.token] == w && w.ctl(syscall.EPOLL_CTL_MOD)
}

func (w *Watcher) stop() {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.watches[w.token] == w {
		delete(set.watches, w.token)
		w.ctl(syscall.EPOLL_CTL_DEL)
	}
}

// ctl runs epoll_ctl on w's socket while the socket is open.
func (w *Watcher) ctl(op int) bool {
	var cerr error
	err := w.rc.Control(func(fd uintptr) {
		cerr = syscall.EpollCtl(set.epfd, op, int(fd), &syscall.EpollEvent{Events: events, Fd: w.token})
	})
	return err == nil && cerr == nil
}

// serve calls ready for an event, and arms w again if ready asks.
func (w *Watcher) serve() {
	if !w.ready() || !w.rearm() {
		w.stop()
	}
}

// pollable hands the epoll set's own descriptor to Go's network poller
// (an epoll set is readable while it has events), so that the loop waits
// for it as any reader waits for its socket: parked, not in a system call.
// A goroutine back from a blocking system call with no core free waits in
// the scheduler's global queue, behind the goroutines the cores are busy
// with, and so would every socket the set watches; one the poller wakes
// runs next.
//
// If the poller will not take it, fd is closed and nothing is watched.
func pollable(fd int) (syscall.RawConn, bool) {
	if syscall.SetNonblock(fd, true) != nil {
		syscall.Close(fd)
		return nil, false
	}
	f := os.NewFile(uintptr(fd), "netpoll")
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil { // not in the poller
		f.Close()
		return nil, false
	}
	set.file = f // kept: collected, the file would close fd
	return rc, true
}

// loop has a goroutine serve each socket that has something to read,
// waiting in Go's network poller while none has.
func loop(rc syscall.RawConn) {
	evs := make([]syscall.EpollEvent, 256)
	for {
		var n int
		var werr error
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, werr = syscall.EpollWait(int(fd), evs, 0)
				if werr != syscall.EINTR {
					return n > 0 || werr != nil
				}
			}
		})
		if err != nil || werr != nil {
			// A bad descriptor or buffer, which cannot be. The watched
			// connections are then read by no one: a WebSocket client's
			// pongs go unread, so its stream ends at the next heartbeat.
			return
		}
		set.mu.Lock()
		for _, ev := range evs[:n] {
			if w := set.watches[ev.Fd]; w != nil {
				gopool.Go(w.serve)
			}
		}
		set.mu.Unlock()
	}
}

func watched() int {
	set.mu.Lock()
	defer set.mu.Unlock()
	return len(set.watches)
}
