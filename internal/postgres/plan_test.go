package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// TestThreadQueriesUseIndexes checks PostgreSQL's plans for the thread
// look-ups: with sequential scans priced out, every step must be an index
// probe (a query that cannot use an index still shows a Seq Scan).
func TestThreadQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Plans follow statistics: 20 conversations of 1000 messages, each a
	// reply to the one before, analyzed, as a busy server's table would be.
	if _, err := conn.Exec(ctx, `INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data)
		SELECT 'c' || (i % 20), 'm' || i, i, 't', CASE WHEN i >= 20 THEN 'm' || (i - 20) END, 'a', i / 20, '{}'
		FROM generate_series(0, 19999) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE messages"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		query string
		args  []any
		index []string
	}{
		"replies":     {repliesQuery, []any{"c1", "m1", 0, 10}, []string{"messages_by_reply_to"}},
		"ancestors":   {ancestorRefsQuery, []any{"c1", "m981", 100}, []string{"messages_pkey"}},
		"descendants": {descendantRefsQuery, []any{"c1", "m1", 0, 10}, []string{"messages_pkey", "messages_by_reply_to"}},
		"rows by id":  {rowsByIDQuery, []any{"c1", []string{"m1", "m21"}}, []string{"messages_pkey"}},
	}
	for name, c := range cases {
		plan := explain(t, ctx, conn.Conn(), c.query, c.args...)
		text := strings.Join(plan, "\n")
		// A scan of the messages table, or a search on the conversation
		// alone, reads whole conversations.
		for _, step := range plan {
			whole := (strings.HasPrefix(step, "Index Cond: (conversation_id = ") || strings.HasPrefix(step, "Recheck Cond: (conversation_id = ")) && !strings.Contains(step, " AND ")
			if whole || strings.Contains(step, "Seq Scan on messages") {
				t.Errorf("%s reads whole conversations (%s):\n%s", name, step, text)
			}
		}
		for _, idx := range c.index {
			if !strings.Contains(text, idx) {
				t.Errorf("%s does not use %s:\n%s", name, idx, text)
			}
		}
	}
}

// TestReadEventsReadsAPage checks PostgreSQL's plan for a page of a log
// whose events refer to message rows, on tables never analyzed (a new
// store): it reads the page from the log's index and each referred row by
// its key, never every message or every event after the position.
func TestReadEventsReadsAPage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One conversation of 20,000 events, every tenth referring to one of
	// its 2000 message rows.
	for _, q := range []string{
		`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data)
			SELECT 'c', 'm' || i, i * 10, 't', NULL, 'a', 0, '{}' FROM generate_series(1, 2000) AS i`,
		`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data, ref)
			SELECT 'c', i, 'chunk', 1, 't', 'a', 'none', now(), '{}', CASE WHEN i % 10 = 0 THEN 'm' || (i / 10) END FROM generate_series(1, 20000) AS i`,
	} {
		if _, err := db.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	text := strings.Join(explain(t, ctx, conn.Conn(), readEventsQuery, "c", 5000, 1000), "\n")
	if strings.Contains(text, "Hash") || strings.Contains(text, "Seq Scan on messages") || !strings.Contains(text, "messages_pkey") {
		t.Errorf("a page of the log reads more than the page and its rows:\n%s", text)
	}
}

// explain returns the steps of PostgreSQL's plan for q, trimmed.
func explain(t *testing.T, ctx context.Context, conn *pgx.Conn, q string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
