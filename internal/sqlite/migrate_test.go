package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/sqlite"
)

// TestConcurrentMigrations: processes that migrate one fresh database at
// once (two "parley migrate", or "serve" and "migrate") all succeed, and
// apply each migration once; so does a migrate beside an Open.
func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := latestVersion(t)
	for round := range 10 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("parley-%d.db", round))
		const n = 4
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				if i == n-1 { // one of them opens the store as serve does
					db, err := sqlite.Open(ctx, path, sqlite.Options{})
					if err == nil {
						db.Close()
					}
					errs <- err
					return
				}
				_, to, err := sqlite.Migrate(ctx, path)
				if err == nil && to != want {
					err = fmt.Errorf("migrated to %d, want %d", to, want)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if from, to, err := sqlite.Migrate(ctx, path); err != nil || from != want || to != want {
			t.Fatalf("round %d: migrating again: %d -> %d, %v", round, from, to, err)
		}
		if _, err := os.Stat(path + "-migrate.lock"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("round %d: the migration lock is left beside the database (%v)", round, err)
		}
		twice := 0
		db, err := sql.Open("sqlite", path)
		if err == nil {
			err = db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT version_id FROM goose_db_version GROUP BY version_id HAVING count(*) > 1)`).Scan(&twice)
			db.Close()
		}
		if err != nil || twice != 0 {
			t.Fatalf("round %d: %d migrations applied more than once (%v)", round, twice, err)
		}
	}
}

// latestVersion is the version a fresh database migrates to.
func latestVersion(t *testing.T) int64 {
	t.Helper()
	_, to, err := sqlite.Migrate(context.Background(), filepath.Join(t.TempDir(), "latest.db"))
	if err != nil {
		t.Fatal(err)
	}
	return to
}
