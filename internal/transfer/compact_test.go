package transfer_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/retention"
	"github.com/parleyhq/parley/internal/transfer"
)

// compactAll compacts every conversation of eng's store as if two days had
// passed, with a day of retention.
func compactAll(t testing.TB, eng *engine.Engine) int64 {
	t.Helper()
	sw := retention.New(storeOf(eng), retention.Options{Retention: 24 * time.Hour, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	var n int64
	for range 100 {
		st, err := sw.Pass(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Events
		if st.Round && st.Events == 0 {
			return n
		}
	}
	t.Fatal("compaction did not end")
	return n
}

// TestCompactedRoundTrip: a conversation whose ended messages' chunk events
// were compacted exports with a tombstone for each, imports into either
// backend, and exports again the same but for the epoch; compacting the
// copy changes nothing of its export, and readers see the same views.
func TestCompactedRoundTrip(t *testing.T) {
	t.Parallel()
	backends := map[string]func(testing.TB) *engine.Engine{"sqlite": sqliteEngine, "postgres": postgresEngine}
	for from, mkFrom := range backends {
		for to, mkTo := range backends {
			t.Run(from+"-to-"+to, func(t *testing.T) {
				t.Parallel()
				src := mkFrom(t)
				id := richConversation(t, src)
				whole := export(t, src, id, transfer.JSONL)
				if n := compactAll(t, src); n == 0 {
					t.Fatal("nothing was compacted")
				}
				first := export(t, src, id, transfer.JSONL)
				if !bytes.Contains(first, []byte(`"type":"compacted"`)) || bytes.Count(first, []byte("\n")) != bytes.Count(whole, []byte("\n")) {
					t.Fatalf("the compacted export has no tombstones, or another number of lines:\n%s", first)
				}
				dst := mkTo(t)
				must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), dst, bytes.NewReader(first), transfer.ImportOptions{}))
				second := export(t, dst, id, transfer.JSONL)
				if !bytes.Equal(withoutEpoch(first), withoutEpoch(second)) {
					t.Fatalf("the second export differs:\n%s\n---\n%s", first, second)
				}
				compactAll(t, dst) // the imported tombstones become spans
				if third := export(t, dst, id, transfer.JSONL); !bytes.Equal(second, third) {
					t.Fatalf("compacting the copy changed its export:\n%s\n---\n%s", second, third)
				}
				sameViews(t, src, dst, id)
			})
		}
	}
}

// TestImportRefusesAForgedTombstone: a compacted event carries {} and
// nothing else, so that no import can make a read skip or repeat seqs.
func TestImportRefusesAForgedTombstone(t *testing.T) {
	t.Parallel()
	src := sqliteEngine(t)
	id := richConversation(t, src)
	compactAll(t, src)
	file := export(t, src, id, transfer.JSONL)
	i := bytes.Index(file, []byte(`"type":"compacted"`))
	j := bytes.Index(file[i:], []byte(`"data":{}`))
	if i < 0 || j < 0 {
		t.Fatalf("no tombstone to forge in:\n%s", file)
	}
	forged := append(append(append([]byte{}, file[:i+j]...), []byte(`"data":{"from":1}`)...), file[i+j+len(`"data":{}`):]...)
	_, err := transfer.Import(ctxT(t), sqliteEngine(t), bytes.NewReader(forged), transfer.ImportOptions{})
	if parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("a tombstone with data: %v, want invalid_value", err)
	}
}
