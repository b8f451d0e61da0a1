package store

import "context"

// Backuper is a store that copies itself, consistently and while it runs,
// into a new file: SQLite. (PostgreSQL has its own tools: pg_dump, and
// point-in-time recovery.)
type Backuper interface {
	// Backup writes a copy of the whole store, as it is at one moment, to
	// a new file at path, telling progress (if not nil) the pages copied
	// of how many as it goes. Writers wait at most a moment for it.
	Backup(ctx context.Context, path string, progress func(phase string, done, total int)) error
}
