package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/sqlite"
	"github.com/parleyhq/parley/store/storetest"
)

// BenchmarkSearch searches a corpus of messages (20,000, or as many as
// PARLEY_SEARCH_BENCH_MESSAGES says: 1000000 for BENCHMARKS.md). The corpus
// is built once and kept in the temporary directory, named by its version
// and size, so that later runs open it at once; delete
// $TMPDIR/parley-search-bench-* to build it again.
func BenchmarkSearch(b *testing.B) {
	c := storetest.SearchBenchCorpus(b)
	path := filepath.Join(os.TempDir(), "parley-search-bench-"+c.Name()+".db")
	if _, err := os.Stat(path); err != nil {
		buildSearchCorpus(b, path, c)
	}
	db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	storetest.BenchmarkSearch(b, db, c)
}

// buildSearchCorpus writes the corpus into a new file beside path, then
// names it path: a build cut short leaves no corpus behind to be taken
// for a whole one.
func buildSearchCorpus(b *testing.B, path string, c storetest.SearchCorpus) {
	tmp := path + ".building"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		os.Remove(f)
	}
	start := time.Now()
	db, err := sqlite.Open(context.Background(), tmp, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := storetest.BuildSearchCorpus(context.Background(), db, c); err != nil {
		db.Close()
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} { // none, once checkpointed at close
		if _, err := os.Stat(tmp + suffix); err == nil {
			if err := os.Rename(tmp+suffix, path+suffix); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built a corpus of %d messages in %s: %s", c.Messages(), time.Since(start).Round(time.Second), path)
}

// BenchmarkAppendMessages measures writing messages with the search index
// kept in step (its triggers) and, for comparison, without it (the
// triggers dropped).
func BenchmarkAppendMessages(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		name := map[bool]string{true: "indexed", false: "unindexed"}[indexed]
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "parley.db")
			if _, _, err := sqlite.Migrate(context.Background(), path); err != nil {
				b.Fatal(err)
			}
			if !indexed {
				raw, err := sql.Open("sqlite", path)
				if err != nil {
					b.Fatal(err)
				}
				for _, tr := range []string{"insert", "unindex", "reindex", "delete"} {
					if _, err := raw.Exec(`DROP TRIGGER message_search_` + tr); err != nil {
						b.Fatal(err)
					}
				}
				raw.Close()
			}
			db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			storetest.BenchmarkAppendMessages(b, db)
		})
	}
}
