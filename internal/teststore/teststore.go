// Package teststore opens the store that the engine's and the runners'
// tests run on: a new SQLite file, or with PARLEY_TEST_STORE=postgres a
// PostgreSQL schema of its own (in the database PARLEY_TEST_POSTGRES_URL
// names), so that the same tests run on both stores.
package teststore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// EnvVar names the variable that picks the store: sqlite (the default) or
// postgres.
const EnvVar = "PARLEY_TEST_STORE"

// Open opens a new, empty store of the kind EnvVar names, closed when the
// test ends. On PostgreSQL without PARLEY_TEST_POSTGRES_URL the test is
// skipped.
func Open(t testing.TB) store.Store {
	t.Helper()
	ctx := context.Background()
	var db store.Store
	var err error
	switch kind := os.Getenv(EnvVar); kind {
	case "", "sqlite":
		db, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	case "postgres":
		db, err = postgres.Open(ctx, pgtest.Schema(t))
	default:
		t.Fatalf("%s=%q: want sqlite or postgres", EnvVar, kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
