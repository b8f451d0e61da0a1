// Package postgres is the PostgreSQL store of Parley, on pgx. Appends take
// the conversation's row lock with a conditional UPDATE of its last seq, so
// that seq order is commit order and a stale writer gets ECONFLICT; events,
// messages, the idempotency record and the state snapshot go in the same
// transaction. Appends of many conversations are committed in groups, one
// transaction each (see committer). The schema mirrors the SQLite store's.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// DB is a store.Store on a PostgreSQL database. It is safe for concurrent use.
type DB struct {
	reader // reads over pool
	pool   *pgxpool.Pool
	group  *committer
	groups atomic.Int64 // group commits made, for tests
}

var _ store.Store = (*DB)(nil)

// Open connects to the database at url (a postgres:// URL), migrates it to
// the latest schema under an advisory lock (so that many nodes may start at
// once), and returns the store. Unless the URL sets pool_max_conns, the
// pool holds at least 12 connections.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		// The commit lanes hold a connection each while they write;
		// leave reads and the other writes room beside them.
		cfg.MaxConns = max(cfg.MaxConns, 4*commitLanes+4)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool, 0); err != nil {
		pool.Close()
		return nil, err
	}
	db := &DB{reader: reader{q: pool}, pool: pool}
	db.group = newCommitter(db, commitLanes, commitMaxBatch)
	return db, nil
}

// MigrateTo brings the database at url up to version (0: the latest).
func MigrateTo(ctx context.Context, url string, version int64) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrate(ctx, pool, version)
}

// Migrate brings the database at url up to the latest schema, under the
// same advisory lock as Open, and reports the versions before and after.
func Migrate(ctx context.Context, url string) (from, to int64, err error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	p, closeDB, err := provider(pool)
	if err != nil {
		return 0, 0, err
	}
	defer closeDB()
	if from, err = p.GetDBVersion(ctx); err != nil {
		return 0, 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return from, 0, fmt.Errorf("migrate: %w", err)
	}
	to, err = p.GetDBVersion(ctx)
	return from, to, err
}

// provider returns a goose provider of the embedded migrations over pool,
// locked by a PostgreSQL advisory lock; call closeDB when done.
func provider(pool *pgxpool.Pool) (p *goose.Provider, closeDB func(), err error) {
	sqldb := stdlib.OpenDBFromPool(pool)
	// Tried every second for five minutes (goose's default tries every
	// five seconds): a node waiting on another's migration starts soon
	// after it ends.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		sqldb.Close()
		return nil, nil, err
	}
	p, err = goose.NewProvider(database.DialectPostgres, sqldb, Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		sqldb.Close()
		return nil, nil, err
	}
	return p, func() { sqldb.Close() }, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	p, closeDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer closeDB()
	if version == 0 {
		_, err = p.Up(ctx)
	} else {
		_, err = p.UpTo(ctx, version)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Close waits for the appends being committed, then closes the
// connection pool; appends made after it fail.
func (db *DB) Close() error {
	db.group.close()
	db.pool.Close()
	return nil
}

// isUnique reports whether err is a unique violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// tx runs fn in a transaction that commits if fn returns nil.
func (db *DB) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	// A write once begun runs to its end even if the caller's context ends
	// (a client that went away): cancelling mid-COMMIT would leave its
	// outcome unknown. SQLite's writer does the same; writeTimeout bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	return pgx.BeginFunc(ctx, db.pool, fn)
}

// writeTimeout bounds one write transaction.
const writeTimeout = 30 * time.Second

// tsArg turns a time into a query argument: NULL for the zero time.
func tsArg(t parley.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Time
}

// fromTS turns a scanned nullable time into a parley.Time.
func fromTS(t *time.Time) parley.Time {
	if t == nil {
		return parley.Time{}
	}
	return parley.NewTime(*t)
}
