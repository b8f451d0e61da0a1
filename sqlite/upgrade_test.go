package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/sqlite"
	"github.com/parleyhq/parley/store"
	"github.com/parleyhq/parley/store/storetest"
	"github.com/pressly/goose/v3/database"
)

// TestUpgradeMovesQueues: a database whose state snapshots hold their
// prompt queues is opened with the current code, which moves each queue to
// its own table (storetest.UpgradeMovesQueues), and back down.
func TestUpgradeMovesQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := sqlite.MigrateTo(ctx, path, storetest.QueuedVersion); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeMovesQueues(t, raw, database.DialectSQLite3, sqlite.Migrations(), func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// TestUpgradeIndexesMessages: the messages of a database made before
// search are found once the current code has opened it
// (storetest.UpgradeIndexesMessages).
func TestUpgradeIndexesMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := sqlite.MigrateTo(ctx, path, storetest.SearchVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeIndexesMessages(t, raw, func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// TestUpgradeKeepsRowsWithContent: rows written with their content before
// rows left it out read, search and leave the index as before
// (storetest.UpgradeKeepsRowsWithContent), and the full-text index agrees
// with its rows after.
func TestUpgradeKeepsRowsWithContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := sqlite.MigrateTo(ctx, path, storetest.RowTextVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeKeepsRowsWithContent(t, raw, func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
	if _, err := raw.Exec(`INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("the index disagrees with its rows: %v", err)
	}
}

// TestDowngradePutsRowsBack: undoing the rows without content and the
// references to rows gives back what was written
// (storetest.DowngradePutsRowsBack).
func TestDowngradePutsRowsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.DowngradePutsRowsBack(t, raw, database.DialectSQLite3, sqlite.Migrations(), func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}
