package loadgen

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/sqlite"
)

// ceilingBatch is the rows per transaction of the store ceiling.
const ceilingBatch = 100

// ceilings measures both raw ceilings and fills them into rep.
func (b *bench) ceilings(ctx context.Context, rep *Report, dir string) error {
	cfg := b.cfg
	var err error
	if cfg.Postgres != "" {
		rep.Ceilings.Store, err = pgCeiling(ctx, cfg.Postgres, cfg.Conversations, cfg.DeltaBytes, cfg.CeilingDuration)
	} else {
		rep.Ceilings.Store, err = sqliteCeiling(ctx, dir, cfg.SQLiteSync, cfg.Conversations, cfg.DeltaBytes, cfg.CeilingDuration)
	}
	if err != nil {
		return fmt.Errorf("store ceiling: %w", err)
	}
	if cfg.Subscribers == 0 {
		rep.Ceilings.Broadcast.Method = "not measured: no subscribers"
		return nil
	}
	frame := rep.Ceilings.Broadcast.FrameBytes
	if frame == 0 {
		frame = 200 + cfg.DeltaBytes // no chunk was delivered to sample: a typical chunk event
	}
	paced := rep.DurableDeltasPerSec / float64(cfg.Conversations)
	bc, err := broadcastCeiling(ctx, cfg.Conversations, cfg.Subscribers, frame, cfg.CeilingDuration, paced)
	if err != nil {
		return fmt.Errorf("broadcast ceiling: %w", err)
	}
	rep.Ceilings.Broadcast = bc
	return nil
}

// chunkRows makes what the store ceiling inserts: per conversation its id
// and a chunk event's data of the same shape and size as Parley's.
func chunkRows(n, deltaBytes int) (ids []string, data [][]byte, msgIDs []string) {
	for range n {
		id, mid := uuid.NewString(), uuid.NewString()
		d := fmt.Appendf(nil, `{"messageId":%q,"content":"`, mid)
		d = appendStamped(d, 0, deltaBytes)
		ids, data, msgIDs = append(ids, id), append(data, append(d, `"}`...)), append(msgIDs, mid)
	}
	return ids, data, msgIDs
}

// sqliteCeiling inserts chunk event rows, ceilingBatch per transaction,
// interleaved over n conversations, into a scratch SQLite file in dir with
// Parley's schema and pragmas, for d.
func sqliteCeiling(ctx context.Context, dir, sync string, n, deltaBytes int, d time.Duration) (StoreCeiling, error) {
	sync = strings.ToUpper(sync)
	res := StoreCeiling{Kind: "sqlite", Method: fmt.Sprintf("batched inserts of the same chunk event rows, %d per transaction over %d conversations, into a scratch SQLite file in %s (WAL, synchronous=%s); bytes: its db+wal growth after wal_checkpoint(TRUNCATE)", ceilingBatch, n, dir, sync)}
	path := filepath.Join(dir, randomName("parley-bench-ceiling-")+".db")
	defer removeSQLite(path)
	db, err := sqlite.Open(ctx, path, sqlite.Options{}) // Parley's schema
	if err != nil {
		return res, err
	}
	if err := db.Close(); err != nil {
		return res, err
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_txlock=immediate")
	if err != nil {
		return res, err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	sz := &sqliteSizer{path: path, db: raw}
	size0, err := sz.size(ctx)
	if err != nil {
		return res, err
	}
	ids, data, msgIDs := chunkRows(n, deltaBytes)
	seqs := make([]int64, n)
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	start := time.Now()
	var rows int64
	for time.Since(start) < d {
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			return res, err
		}
		st, err := tx.PrepareContext(ctx, `INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES (?, ?, 'chunk', 1, ?, 'bot', 'none', ?, ?)`)
		if err != nil {
			tx.Rollback()
			return res, err
		}
		for range ceilingBatch {
			c := int(rows % int64(n))
			seqs[c]++
			if _, err := st.ExecContext(ctx, ids[c], seqs[c], msgIDs[c], ts, data[c]); err != nil {
				tx.Rollback()
				return res, err
			}
			rows++
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			return res, err
		}
	}
	res.Rows, res.RowsPerSec = rows, float64(rows)/time.Since(start).Seconds()
	size1, err := sz.size(ctx)
	if err != nil {
		return res, err
	}
	res.BytesPerTextByte = float64(size1-size0) / float64(rows*int64(deltaBytes))
	return res, nil
}

// pgCeiling is sqliteCeiling on PostgreSQL: COPY of ceilingBatch rows per
// transaction into the events table of a scratch schema, dropped after.
func pgCeiling(ctx context.Context, pgURL string, n, deltaBytes int, d time.Duration) (res StoreCeiling, err error) {
	res = StoreCeiling{Kind: "postgres", Method: fmt.Sprintf("batched inserts (COPY) of the same chunk event rows, %d per transaction over %d conversations, into a scratch schema of the same PostgreSQL; bytes: growth of pg_total_relation_size of its tables", ceilingBatch, n)}
	schema, schemaURL, err := createSchema(ctx, pgURL, "parley_bench_ceiling_")
	if err != nil {
		return res, err
	}
	defer func() {
		if derr := dropSchema(pgURL, schema); derr != nil && err == nil {
			err = derr
		}
	}()
	db, err := postgres.Open(ctx, schemaURL) // Parley's schema
	if err != nil {
		return res, err
	}
	if err := db.Close(); err != nil {
		return res, err
	}
	conn, err := connectPG(ctx, schemaURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	sz, err := newPGSizer(ctx, pgURL, schema)
	if err != nil {
		return res, err
	}
	defer sz.close()
	size0, err := sz.size(ctx)
	if err != nil {
		return res, err
	}
	ids, data, msgIDs := chunkRows(n, deltaBytes)
	seqs := make([]int64, n)
	ts := time.Now()
	batch := make([][]any, ceilingBatch)
	cols := []string{"conversation_id", "seq", "type", "turn", "turn_id", "agent_id", "finality", "ts", "data"}
	start := time.Now()
	var rows int64
	for time.Since(start) < d {
		for i := range batch {
			c := int(rows % int64(n))
			seqs[c]++
			batch[i] = []any{ids[c], seqs[c], "chunk", int32(1), msgIDs[c], "bot", "none", ts, data[c]}
			rows++
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return res, err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, cols, pgx.CopyFromRows(batch)); err != nil {
			tx.Rollback(ctx)
			return res, err
		}
		if err := tx.Commit(ctx); err != nil {
			return res, err
		}
	}
	res.Rows, res.RowsPerSec = rows, float64(rows)/time.Since(start).Seconds()
	size1, err := sz.size(ctx)
	if err != nil {
		return res, err
	}
	res.BytesPerTextByte = float64(size1-size0) / float64(rows*int64(deltaBytes))
	return res, nil
}
