// Package pgtest gives tests an empty PostgreSQL schema of their own in the
// database named by PARLEY_TEST_POSTGRES_URL, or skips them when it is unset.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EnvVar names the variable that points the tests at a PostgreSQL database.
const EnvVar = "PARLEY_TEST_POSTGRES_URL"

// Schema creates a new schema, drops it when the test ends, and returns a
// URL whose connections use it. Without EnvVar the test is skipped.
func Schema(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvVar)
	if base == "" {
		t.Skip(EnvVar + " is not set: skipping the PostgreSQL tests (.ci/run sets it)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("%s is set but PostgreSQL is unreachable: %v", EnvVar, err)
	}
	defer conn.Close(ctx)
	schema := "parley_test_" + uuid.NewString()[:8]
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), base); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
