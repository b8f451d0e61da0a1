package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded migrations, for tests and tools.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// newProvider returns a goose provider over the embedded migrations.
func newProvider(db *sql.DB) (*goose.Provider, error) {
	return goose.NewProvider(database.DialectSQLite3, db, Migrations())
}

// migrate brings db, the database at path, up to the latest version and
// reports the versions before and after. It holds the migration lock
// throughout, and reads the version under it: a process that migrates
// the same file at the same time waits, then finds its work done.
func migrate(ctx context.Context, db *sql.DB, path string) (from, to int64, err error) {
	unlock, err := lockMigrations(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	p, err := newProvider(db)
	if err != nil {
		return 0, 0, err
	}
	if from, err = p.GetDBVersion(ctx); err != nil {
		return 0, 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return from, 0, fmt.Errorf("migrate: %w", err)
	}
	to, err = p.GetDBVersion(ctx)
	return from, to, err
}

// Migrate opens the database at path (creating it if needed), brings its
// schema up to date, and reports the versions before and after. Processes
// that migrate one file at once take turns (see migrate).
func Migrate(ctx context.Context, path string) (from, to int64, err error) {
	db, err := sql.Open("sqlite", dsn(path, roleWriter, SyncFull))
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return migrate(ctx, db, path)
}

// MigrateTo brings the database at path up to exactly version, no further,
// under the migration lock.
// It exists so that upgrade tests can make a database of an older version.
func MigrateTo(ctx context.Context, path string, version int64) error {
	db, err := sql.Open("sqlite", dsn(path, roleWriter, SyncFull))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	unlock, err := lockMigrations(ctx, path)
	if err != nil {
		return err
	}
	defer unlock()
	p, err := newProvider(db)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
