//go:build !unix

package peek

import (
	"errors"
	"net"
	"time"
)

// Read reads what comes on conn within a millisecond (0 and no error
// when nothing did), an error when the peer is gone.
func Read(conn net.Conn, buf []byte) (int, error) {
	_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err := conn.Read(buf)
	_ = conn.SetReadDeadline(time.Time{})
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = nil
	}
	return n, err
}
