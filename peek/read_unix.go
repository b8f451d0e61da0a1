//go:build unix

package peek

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// Read reads what has come on conn into buf without waiting: 0 and no
// error when nothing has, an error when the peer is gone or the
// connection failed.
func Read(conn net.Conn, buf []byte) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return readSoon(conn, buf)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), buf)
		return true // whatever it read, do not wait for more
	}); err != nil {
		return 0, err
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
		return 0, nil
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, ErrClosedByPeer
	}
	return n, nil
}

// readSoon reads what comes on conn within a millisecond: for a
// connection that is not a socket of the system's.
func readSoon(conn net.Conn, buf []byte) (int, error) {
	_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err := conn.Read(buf)
	_ = conn.SetReadDeadline(time.Time{})
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = nil
	}
	return n, err
}

// ErrClosedByPeer is what Read returns once the peer closed the connection.
var ErrClosedByPeer = errors.New("closed by the peer")
