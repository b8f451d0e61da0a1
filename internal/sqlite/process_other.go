//go:build !unix

package sqlite

// signalZero would report whether a process of id pid exists. Off Unix it
// cannot tell, and takes it to run: a database another process left open
// then has its epochs renewed only if a sync failed.
func signalZero(pid int) bool { return true }
