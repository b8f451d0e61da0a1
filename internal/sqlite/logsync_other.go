//go:build !linux

package sqlite

import "os"

// fdatasync syncs f (all of it: here there is no fdatasync).
func fdatasync(f *os.File) error { return f.Sync() }
