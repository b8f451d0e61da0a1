package postgres_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/store/storetest"
)

// BenchmarkSearchPostgres searches the corpus of the SQLite benchmark
// (20,000 messages, or PARLEY_SEARCH_BENCH_MESSAGES) in PostgreSQL. The
// corpus is built once into a schema named by its version and size, which
// is kept for later runs: DROP SCHEMA parley_search_bench_… CASCADE frees
// it.
func BenchmarkSearchPostgres(b *testing.B) {
	base := os.Getenv(pgtest.EnvVar)
	if base == "" {
		b.Skip(pgtest.EnvVar + " is not set: skipping the PostgreSQL benchmarks")
	}
	c := storetest.SearchBenchCorpus(b)
	schema := "parley_search_bench_" + strings.ReplaceAll(strings.ReplaceAll(c.Name(), "-", "_"), "x", "_")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		// Built under another name, then renamed: a build cut short
		// leaves no corpus to be taken for a whole one.
		building := schema + "_building"
		start := time.Now()
		for _, q := range []string{"DROP SCHEMA IF EXISTS " + building + " CASCADE", "CREATE SCHEMA " + building} {
			if _, err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		db, err := postgres.Open(ctx, withSchema(b, base, building))
		if err != nil {
			b.Fatal(err)
		}
		err = storetest.BuildSearchCorpus(ctx, db, c)
		db.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range []string{"ALTER SCHEMA " + building + " RENAME TO " + schema, "ANALYZE " + schema + ".messages", "ANALYZE " + schema + ".conversations", "ANALYZE " + schema + ".conversation_members"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("built a corpus of %d messages in %s: schema %s", c.Messages(), time.Since(start).Round(time.Second), schema)
	}
	db, err := postgres.Open(ctx, withSchema(b, base, schema))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	storetest.BenchmarkSearch(b, db, c)
}

func withSchema(b *testing.B, base, schema string) string {
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// BenchmarkAppendMessagesPostgres measures writing messages with the
// search column and its indexes and, for comparison, without them (dropped
// from the schema).
func BenchmarkAppendMessagesPostgres(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		name := map[bool]string{true: "indexed", false: "unindexed"}[indexed]
		b.Run(name, func(b *testing.B) {
			url := pgtest.Schema(b)
			db, err := postgres.Open(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if !indexed {
				conn, err := pgx.Connect(context.Background(), url)
				if err != nil {
					b.Fatal(err)
				}
				_, err = conn.Exec(context.Background(), `ALTER TABLE messages DROP COLUMN search, DROP COLUMN search_order`)
				conn.Close(context.Background())
				if err != nil {
					b.Fatal(err)
				}
			}
			storetest.BenchmarkAppendMessages(b, db)
		})
	}
}
