//go:build unix

package sqlite

import (
	"errors"
	"syscall"
)

// signalZero reports whether a process of id pid exists.
func signalZero(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
