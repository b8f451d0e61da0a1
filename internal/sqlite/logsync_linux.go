package sqlite

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data (and what reading it needs of its metadata),
// as SQLite syncs its log on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
