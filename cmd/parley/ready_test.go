package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// unhealthy is a store whose health check fails.
type unhealthy struct{ store.Store }

func (unhealthy) Health() error { return errors.New("the disk does not answer") }

// TestReadyAsksTheStoresHealth: /readyz is ready with a SQLite store that
// syncs, and not with a store that says it cannot take writes, though it
// answers reads.
func TestReadyAsksTheStoresHealth(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "p.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := ready(ctx, db); err != nil {
		t.Fatalf("ready with a healthy store: %v", err)
	}
	if err := ready(ctx, unhealthy{db}); err == nil || err.Error() != "the disk does not answer" {
		t.Fatalf("ready with a store whose health fails: %v", err)
	}
}
