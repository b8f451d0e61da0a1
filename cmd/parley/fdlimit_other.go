//go:build !unix

package main

// openFileLimit returns 0: off Unix the server cannot tell how many files
// it may have open.
func openFileLimit() uint64 { return 0 }
