package retention_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/retention"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/transfer"
)

// envInt reads a whole number from the environment, or def.
func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// words are what the benchmark's runner streams, one a delta, as a model
// streams tokens.
var words = strings.Fields("the answer is not what you would expect from a model that streams its tokens one by one " +
	"while readers follow along and resume from wherever they were cut off in the middle of a long reply")

// streamMessages streams n messages of deltas deltas each, one word a delta,
// into a new conversation of eng, and returns its id and the bytes of text.
func streamMessages(b *testing.B, ctx context.Context, eng *engine.Engine, n, deltas int) (string, int64) {
	b.Helper()
	v, err := eng.CreateConversation(ctx, parley.Conversation{ID: "long", Participants: []string{"bot"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		b.Fatal(err)
	}
	id := v.Conversation.ID
	bot := conv.Actor{AgentID: "bot"}
	var text int64
	for i := range n {
		mid := fmt.Sprintf("m%05d", i)
		if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: mid, Role: parley.RoleAssistant, Streaming: true}); err != nil {
			b.Fatal(err)
		}
		for j := range deltas {
			w := words[(i*7+j)%len(words)] + " "
			text += int64(len(w))
			if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: mid, Delta: w}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: mid, Reason: parley.FinishEndTurn, Finality: parley.FinalityNone}); err != nil {
			b.Fatal(err)
		}
	}
	return id, text
}

// compactAll compacts every conversation of st as if two days had passed,
// with a day of retention, and returns how many events it compacted.
func compactAll(b *testing.B, ctx context.Context, st store.Store) int64 {
	b.Helper()
	sw := retention.New(st, retention.Options{Retention: 24 * time.Hour, Rows: 1 << 30, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	var n int64
	for {
		s, err := sw.Pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += s.Events
		if s.Round && s.Events == 0 {
			return n
		}
	}
}

// sqliteSizes vacuums the database at path and returns its size and the
// bytes of each table with its indexes.
func sqliteSizes(b *testing.B, ctx context.Context, path string) (int64, map[string]int64) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`PRAGMA wal_checkpoint(TRUNCATE)`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	var pages, size int64
	if err := db.QueryRowContext(ctx, `SELECT page_count * page_size, page_count FROM pragma_page_count(), pragma_page_size()`).Scan(&size, &pages); err != nil {
		b.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, `SELECT coalesce(m.tbl_name, s.name), sum(s.pgsize) FROM dbstat s LEFT JOIN sqlite_schema m ON m.name = s.name GROUP BY 1`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	tables := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			b.Fatal(err)
		}
		tables[name] = n
	}
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		b.Fatalf("file of %d bytes, %d pages: %v", st.Size(), pages, err)
	}
	return size, tables
}

// postgresSizes vacuums the store's tables (FULL: rewritten, as after
// compaction and a VACUUM FULL) and returns their total size, indexes and
// TOAST included, and each table's.
func postgresSizes(b *testing.B, ctx context.Context, url string) (int64, map[string]int64) {
	b.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	tables := map[string]int64{}
	var total int64
	for _, t := range []string{"conversations", "events", "messages", "queues", "compaction", "conversation_members"} {
		if _, err := conn.Exec(ctx, `VACUUM FULL `+t); err != nil {
			b.Fatal(err)
		}
		var n int64
		if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, t).Scan(&n); err != nil {
			b.Fatal(err)
		}
		tables[t] = n
		total += n
	}
	return total, tables
}

// BenchmarkCompactedStorage streams one conversation of
// PARLEY_BENCH_MESSAGES messages (default 300; 10000 for BENCHMARKS.md) of
// PARLEY_BENCH_DELTAS deltas each (default 100, one word each), and
// reports its storage before and after compaction of the chunk events, on
// SQLite (the file after VACUUM) and on PostgreSQL (the tables after
// VACUUM FULL; the conversation is moved there by an export and import,
// which write the same rows), beside the bytes of text streamed.
func BenchmarkCompactedStorage(b *testing.B) {
	n, deltas := envInt("PARLEY_BENCH_MESSAGES", 300), envInt("PARLEY_BENCH_DELTAS", 100)
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "parley.db")
	lite, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(lite, engine.Options{})
	start := time.Now()
	id, text := streamMessages(b, ctx, eng, n, deltas)
	b.Logf("streamed %d messages of %d deltas (%d bytes of text) in %s", n, deltas, text, time.Since(start).Round(time.Millisecond))
	var export bytes.Buffer
	if _, err := transfer.Export(ctx, reads.New(lite, eng), id, transfer.JSONL, &export); err != nil {
		b.Fatal(err)
	}
	eng.Close()
	report := func(name string, measure func() (int64, map[string]int64), st store.Store) {
		before, tb := measure()
		start := time.Now()
		events := compactAll(b, ctx, st)
		took := time.Since(start)
		after, ta := measure()
		b.Logf("%s: %d events compacted in %s; %d bytes before (%.1f per byte of text), %d after (%.2f per byte of text)",
			name, events, took.Round(time.Millisecond), before, float64(before)/float64(text), after, float64(after)/float64(text))
		b.Logf("%s: by table, before %v", name, tb)
		b.Logf("%s: by table, after  %v", name, ta)
		b.ReportMetric(float64(before)/float64(text), name+"-bytes-before/text-byte")
		b.ReportMetric(float64(after)/float64(text), name+"-bytes-after/text-byte")
		checkResumes(b, ctx, st, id, export.Bytes(), deltas)
	}
	for b.Loop() {
	}
	b.Run("sqlite", func(b *testing.B) {
		for b.Loop() {
		}
		if err := lite.Close(); err != nil {
			b.Fatal(err)
		}
		raw, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close()
		report("sqlite", func() (int64, map[string]int64) { return sqliteSizes(b, ctx, path) }, raw)
	})
	b.Run("postgres", func(b *testing.B) {
		for b.Loop() {
		}
		url := pgtest.Schema(b)
		pg, err := postgres.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer pg.Close()
		peng := engine.New(pg, engine.Options{})
		defer peng.Close()
		if _, err := transfer.Import(ctx, peng, bytes.NewReader(export.Bytes()), transfer.ImportOptions{}); err != nil {
			b.Fatal(err)
		}
		report("postgres", func() (int64, map[string]int64) { return postgresSizes(b, ctx, url) }, pg)
	})
}

// checkResumes folds, for positions before, inside and after the spans
// compaction made (the first message, one in the middle, the last), what a
// client held there before compaction (the export's events up to it) and
// then the compacted log after it, and fails unless each gives the stored
// messages.
func checkResumes(b *testing.B, ctx context.Context, st store.Store, id string, export []byte, deltas int) {
	b.Helper()
	var events []parley.Event
	for line := range bytes.SplitSeq(export, []byte("\n")) {
		var l struct{ Event *parley.Event }
		if json.Unmarshal(line, &l) == nil && l.Event != nil {
			events = append(events, *l.Event)
		}
	}
	rows, err := st.ListMessages(ctx, store.ListMessagesParams{ConversationID: id, Limit: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	want := shownMessages(rows)
	per := int64(deltas + 2) // a message, its deltas, its end
	last := int64(len(events))
	mid := (last / per / 2) * per
	for _, at := range []int64{0, 1, 2 + per/2, per, per + 1, mid + 1 + per/3, last - 2, last - 1, last} {
		f := &client.Fold{}
		for _, e := range events[:at] {
			if err := f.ApplyEvent(e); err != nil {
				b.Fatal(err)
			}
		}
		for after := at; after < last; {
			page, err := st.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, After: after, Limit: 1000})
			if err != nil || len(page) == 0 {
				b.Fatalf("reading after %d: %d events, err %v", after, len(page), err)
			}
			for _, e := range page {
				if e.Seq != after+1 {
					b.Fatalf("seq %d after %d", e.Seq, after)
				}
				if err := f.ApplyEvent(e); err != nil {
					b.Fatal(err)
				}
				after = e.Seq
			}
		}
		if got := shownMessages(f.Messages()); got != want {
			b.Fatalf("resumed from %d of %d: the fold differs from the rows", at, last)
		}
	}
}

// shownMessages is what a client shows of messages.
func shownMessages(ms []*parley.Message) string {
	var sb strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&sb, "%s %s %q\n", m.ID, m.Status, m.Content)
	}
	return sb.String()
}
