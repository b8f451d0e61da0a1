package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// TestConcurrentMigrations: nodes that migrate one fresh schema at once
// (several "parley migrate", or servers starting beside one) all succeed:
// the advisory lock makes them take turns.
func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want int64
	for round := range 3 {
		url := pgtest.Schema(t)
		const n = 4
		var wg sync.WaitGroup
		errs := make(chan error, n)
		tos := make(chan int64, n)
		for i := range n {
			wg.Go(func() {
				if i == n-1 { // one of them opens the store as serve does
					db, err := postgres.Open(ctx, url)
					if err == nil {
						db.Close()
					}
					errs <- err
					return
				}
				_, to, err := postgres.Migrate(ctx, url)
				tos <- to
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		close(tos)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for to := range tos {
			if want == 0 {
				want = to
			}
			if to != want || to == 0 {
				t.Fatalf("round %d: migrated to %d, want %d", round, to, want)
			}
		}
		if from, to, err := postgres.Migrate(ctx, url); err != nil || from != want || to != want {
			t.Fatal(fmt.Errorf("round %d: migrating again: %d -> %d, %v", round, from, to, err))
		}
	}
}
