//go:build !unix

package sqlite

import "context"

// lockMigrations would take the lock under which one process at a time
// migrates the database at path. Off Unix there is none: run one
// migration at a time (one "parley migrate", or one server starting).
func lockMigrations(context.Context, string) (unlock func(), err error) {
	return func() {}, nil
}
