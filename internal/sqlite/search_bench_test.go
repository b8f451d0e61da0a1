package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store/storetest"
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

// BenchmarkStreamedResponses measures the write path of streamed responses,
// through the engine, with the search index kept in step and without it
// (its triggers dropped): 8 conversations at once, each streaming responses
// of 100 deltas of about 32 bytes of words, each response finalized (and so
// indexed) after its last delta. Each op is one delta; the finalize is
// counted in the deltas of its response.
func BenchmarkStreamedResponses(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		b.Run(map[bool]string{true: "indexed", false: "unindexed"}[indexed], func(b *testing.B) {
			db := openBenchStore(b, indexed)
			eng := engine.New(db, engine.Options{})
			defer eng.Close()
			ctx := context.Background()
			const writers, perResponse = 8, 100
			deltas := storetest.BenchDeltas(1000)
			var n atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"bot"}})
					if err != nil {
						b.Error(err)
						return
					}
					bot := conv.Actor{AgentID: "bot"}
					for r := 0; ; r++ {
						mid := fmt.Sprintf("r%d-%d", w, r)
						if _, err := eng.PostMessage(ctx, v.Conversation.ID, conv.PostMessage{Actor: bot, ID: mid, Role: parley.RoleAssistant, Streaming: true}); err != nil {
							b.Error(err)
							return
						}
						for i := range perResponse {
							if n.Add(1) > int64(b.N) {
								return
							}
							if _, err := eng.StreamText(ctx, v.Conversation.ID, conv.StreamText{Actor: bot, MessageID: mid, Delta: deltas[(r*perResponse+i)%len(deltas)]}); err != nil {
								b.Error(err)
								return
							}
						}
						if _, err := eng.FinalizeMessage(ctx, v.Conversation.ID, conv.FinalizeMessage{Actor: bot, MessageID: mid, Reason: parley.FinishEndTurn}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			// What is left to index is indexed in the time measured.
			if err := db.IndexSearch(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
		})
	}
}

// openBenchStore opens a new store, with the search index's triggers or
// without them.
func openBenchStore(b *testing.B, indexed bool) *sqlite.DB {
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
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkAppendMessages measures writing messages with the search index
// kept in step (its triggers) and, for comparison, without it (the
// triggers dropped).
func BenchmarkAppendMessages(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		name := map[bool]string{true: "indexed", false: "unindexed"}[indexed]
		b.Run(name, func(b *testing.B) {
			storetest.BenchmarkAppendMessages(b, openBenchStore(b, indexed))
		})
	}
}
