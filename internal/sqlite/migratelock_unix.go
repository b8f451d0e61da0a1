//go:build unix

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockMigrations takes the lock under which one process at a time
// migrates the database at path: an exclusive flock of the file
// path+"-migrate.lock", made for the while and removed by unlock. It
// waits for the lock until ctx ends. The system drops the lock when its
// holder exits, however it exits (a file a killed holder left is taken
// over).
//
// The lock is not taken on the database file itself: closing another
// descriptor of that file would drop SQLite's own (POSIX) locks on it.
func lockMigrations(ctx context.Context, path string) (unlock func(), err error) {
	name := path + "-migrate.lock"
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// The holder before removes the file before it unlocks: the
			// lock counts only if it is of the file still at name.
			held, err1 := f.Stat()
			now, err2 := os.Stat(name)
			if err1 == nil && err2 == nil && os.SameFile(held, now) {
				return func() {
					os.Remove(name)
					f.Close() // and with it the lock
				}, nil
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, fmt.Errorf("migration lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another process's migration of %s: %w", path, ctx.Err())
		case <-time.After(wait):
		}
	}
}
