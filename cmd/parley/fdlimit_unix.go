//go:build unix

package main

import "syscall"

// openFileLimit returns how many files the process may have open
// (RLIMIT_NOFILE: Go raises its soft limit to the hard one at start), or
// 0 if it cannot tell.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return r.Cur
}
