package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// filledDB makes a database of about mb MiB: 100 conversations of 1 KiB
// events, written with plain SQL in one transaction, which is fast.
func filledDB(b *testing.B, mb int) string {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "parley.db")
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ids := newConversations(b, db, 100)
	db.Close()
	raw, err := sql.Open("sqlite", path+"?_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	tx, err := raw.Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES (?, ?, 'trace', 1, 't', 'a', 'none', '2026-01-01T00:00:00.000Z', ?)`)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(fmt.Sprintf(`{"payload":"%01000d"}`, 0))
	per := mb << 10 / len(ids) // ~1 KiB events of each conversation
	for _, id := range ids {
		for seq := 2; seq < per+2; seq++ {
			if _, err := ins.Exec(id, seq, data); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := tx.Exec(`UPDATE heads SET last_seq = ? WHERE conversation_id = ?`, per+1, id); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return path
}

// pauses records how long each write took.
type pauses struct {
	mu   sync.Mutex
	took []time.Duration
}

func (p *pauses) add(d time.Duration) {
	p.mu.Lock()
	p.took = append(p.took, d)
	p.mu.Unlock()
}

// take returns the writes recorded since the last take, and forgets them.
func (p *pauses) take() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.took
	p.took = nil
	return t
}

// BenchmarkBackupUnderWrites backs up a database of PARLEY_BENCH_BACKUP_MB
// MiB of events (default 16) while 4 writers append to it as fast as they
// can, one event of PARLEY_BENCH_WRITE_BYTES bytes (default 200) a commit, and reports how long the backup
// took and the longest any write took during it, beside the longest in a
// second before it and in as long as it took after it (the WAL, which
// could not be checkpointed past the backup's snapshot, catches up then).
func BenchmarkBackupUnderWrites(b *testing.B) {
	mb := 16
	if n, err := strconv.Atoi(os.Getenv("PARLEY_BENCH_BACKUP_MB")); err == nil && n > 0 {
		mb = n
	}
	size := 200
	if n, err := strconv.Atoi(os.Getenv("PARLEY_BENCH_WRITE_BYTES")); err == nil && n > 0 {
		size = n
	}
	payload := json.RawMessage(fmt.Sprintf(`{"payload":"%0*d"}`, size, 0))
	path := filledDB(b, mb)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	writers := newConversations(b, db, 4)
	var rec pauses
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				e := trace(id, seq+1)
				e.Data = payload
				if err := db.Append(ctx, store.AppendParams{ConversationID: id, ExpectSeq: seq, Events: []parley.Event{e}, State: []byte(`{}`)}); err != nil {
					b.Error(err)
					return
				}
				rec.add(time.Since(start))
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	summary := func(took []time.Duration, over time.Duration) (max, p99 time.Duration, rate float64) {
		if len(took) == 0 {
			return 0, 0, 0
		}
		slices.Sort(took)
		return took[len(took)-1], took[len(took)*99/100], float64(len(took)) / over.Seconds()
	}
	b.ResetTimer()
	for b.Loop() {
		// A window as long as the backup before it (its length is a guess:
		// the last backup's, or a second), the backup, and as long after.
		time.Sleep(200 * time.Millisecond)
		rec.take()
		window := time.Second
		time.Sleep(window)
		before := rec.take()
		start := time.Now()
		if err := sqlite.Backup(ctx, path, filepath.Join(b.TempDir(), "backup-"+uuid.NewString()+".db"), nil); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		during := rec.take()
		time.Sleep(took)
		after := rec.take()
		bmax, bp99, brate := summary(before, window)
		dmax, dp99, drate := summary(during, took)
		amax, ap99, arate := summary(after, took)
		st, _ := os.Stat(path)
		b.ReportMetric(took.Seconds(), "backup-s")
		b.ReportMetric(float64(dmax.Microseconds())/1000, "max-write-ms-during")
		b.ReportMetric(float64(bmax.Microseconds())/1000, "max-write-ms-before")
		b.ReportMetric(float64(amax.Microseconds())/1000, "max-write-ms-after")
		b.Logf("backup of %.0f MiB in %s; writes before: %.0f/s, p99 %s, longest %s; during: %.0f/s, p99 %s, longest %s; after: %.0f/s, p99 %s, longest %s",
			float64(st.Size())/(1<<20), took.Round(time.Millisecond),
			brate, bp99.Round(time.Microsecond), bmax.Round(time.Microsecond),
			drate, dp99.Round(time.Microsecond), dmax.Round(time.Microsecond),
			arate, ap99.Round(time.Microsecond), amax.Round(time.Microsecond))
	}
}

// BenchmarkWritesBehindALongRead holds a read snapshot open, as an online
// backup does while it copies, while a writer appends 64 KiB events one a
// commit until the log is past the 64 MiB at which the checkpointer would
// make it start over, and reports the longest append. (Before the
// checkpointer left the log alone behind such a reader, that was the 10 s
// of the busy timeout, again and again.)
func BenchmarkWritesBehindALongRead(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "parley.db")
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	id := newConversations(b, db, 1)[0]
	payload := json.RawMessage(fmt.Sprintf(`{"payload":"%065536d"}`, 0))
	seq := int64(1)
	for b.Loop() {
		r, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			b.Fatal(err)
		}
		conn, err := r.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var n int
		if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
			b.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		var longest time.Duration
		start := time.Now()
		for range 2400 { // about 150 MiB of log
			e := trace(id, seq+1)
			e.Data = payload
			t := time.Now()
			if err := db.Append(ctx, store.AppendParams{ConversationID: id, ExpectSeq: seq, Events: []parley.Event{e}, State: []byte(`{}`)}); err != nil {
				b.Fatal(err)
			}
			longest = max(longest, time.Since(t))
			seq++
		}
		took := time.Since(start)
		conn.ExecContext(ctx, `ROLLBACK`)
		conn.Close()
		r.Close()
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest-write-ms")
		b.Logf("2400 appends of 64 KiB behind a read snapshot in %s; the longest took %s", took.Round(time.Millisecond), longest.Round(time.Microsecond))
	}
}
