package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver of database/sql, for goose
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/storetest"
	"github.com/pressly/goose/v3/database"
)

func open(t *testing.T, url string) *postgres.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformance runs the shared store suite, the very tests SQLite passes,
// against one PostgreSQL schema shared by all of them.
func TestConformance(t *testing.T) {
	db := open(t, pgtest.Schema(t))
	storetest.Exercise(t, func(*testing.T) store.Store { return db }, storetest.Backend{})
}

// TestManyNodesMigrateAtOnce opens the same fresh schema from several
// "nodes" at once: the advisory lock lets one migrate and the others wait.
func TestManyNodesMigrateAtOnce(t *testing.T) {
	url := pgtest.Schema(t)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			db, err := postgres.Open(context.Background(), url)
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeKeepsData makes a schema at version 1 with data, then opens it
// with the current code.
func TestUpgradeKeepsData(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	if err := postgres.MigrateTo(ctx, url, 1); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	conv := `{"id":"c1","epoch":"e","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdBy":"boss","createdAt":"2026-01-01T00:00:00.000Z"}`
	for _, q := range []string{
		`INSERT INTO conversations VALUES ('c1', now(), '` + conv + `', 1, '{}')`,
		`INSERT INTO events VALUES ('c1', 1, 'conversation.created', 0, '', '', 'none', now(), '` + conv + `')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close(ctx)
	db := open(t, url)
	rec, err := db.GetConversation(ctx, "c1")
	if err != nil || rec.LastSeq != 1 || rec.Conversation.TurnPolicy != parley.PolicyFree {
		t.Fatalf("old conversation after upgrade: %+v, %v", rec, err)
	}
	if n, err := db.CountTokens(ctx); err != nil || n != 0 {
		t.Fatalf("tokens table after upgrade: %d, %v", n, err)
	}
	// Its participants and its creator take part in it; nobody else does.
	for agent, want := range map[string]int{"a": 1, "boss": 1, "b": 0, "admin": 0} {
		if recs, _, err := db.ListConversations(ctx, store.ListConversationsParams{Member: agent}); err != nil || len(recs) != want {
			t.Fatalf("conversations of %s after upgrade: %d, %v; want %d", agent, len(recs), err, want)
		}
	}
}

// TestUpgradeMovesQueues: a schema whose state snapshots hold their prompt
// queues is opened with the current code, which moves each queue to its own
// table (storetest.UpgradeMovesQueues), and back down.
func TestUpgradeMovesQueues(t *testing.T) {
	url := pgtest.Schema(t)
	if err := postgres.MigrateTo(context.Background(), url, storetest.QueuedVersion); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeMovesQueues(t, raw, database.DialectPostgres, postgres.Migrations(), func() store.Store { return open(t, url) })
}

// TestUpgradeIndexesMessages: the messages of a schema made before search
// are found once the current code has opened it
// (storetest.UpgradeIndexesMessages).
func TestUpgradeIndexesMessages(t *testing.T) {
	url := pgtest.Schema(t)
	if err := postgres.MigrateTo(context.Background(), url, storetest.SearchVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeIndexesMessages(t, raw, func() store.Store { return open(t, url) })
}

// namesVersion is the migration that made the table of names.
const namesVersion = 15

// TestUpgradeTakesNames: the ids of the messages and prompts of a schema
// made before names are taken once the current code has opened it
// (storetest.UpgradeTakesNames).
func TestUpgradeTakesNames(t *testing.T) {
	url := pgtest.Schema(t)
	if err := postgres.MigrateTo(context.Background(), url, namesVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeTakesNames(t, raw, func() store.Store { return open(t, url) })
}

// TestUpgradeKeepsRowsWithContent: rows written with their content before
// rows left it out read, search and leave the index as before
// (storetest.UpgradeKeepsRowsWithContent).
func TestUpgradeKeepsRowsWithContent(t *testing.T) {
	url := pgtest.Schema(t)
	if err := postgres.MigrateTo(context.Background(), url, storetest.RowTextVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeKeepsRowsWithContent(t, raw, func() store.Store { return open(t, url) })
}

// TestDowngradePutsRowsBack: undoing the rows without content and the
// references to rows gives back what was written
// (storetest.DowngradePutsRowsBack).
func TestDowngradePutsRowsBack(t *testing.T) {
	url := pgtest.Schema(t)
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.DowngradePutsRowsBack(t, raw, database.DialectPostgres, postgres.Migrations(), func() store.Store { return open(t, url) })
}

// outboxStatusVersion is the schema version that gave outbox rows a
// status, so that a delivery can be given up and a done row removed.
const outboxStatusVersion = 16

// TestUpgradeKeepsDeliveries: the outbox rows of a schema made before they
// had a status read as delivered or pending once the current code has
// opened it (storetest.UpgradeKeepsDeliveries).
func TestUpgradeKeepsDeliveries(t *testing.T) {
	url := pgtest.Schema(t)
	if err := postgres.MigrateTo(context.Background(), url, outboxStatusVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.UpgradeKeepsDeliveries(t, raw, func() store.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// lastActivityVersion is the schema version that keeps each
// conversation's last activity beside its last seq.
const lastActivityVersion = 17

// TestUpgradeKeepsLastActivity: a schema made before the list by last
// activity lists its conversations by the time of their last event once
// the current code opens it (the migration reads it from the log).
func TestUpgradeKeepsLastActivity(t *testing.T) {
	url := pgtest.Schema(t)
	if err := postgres.MigrateTo(context.Background(), url, lastActivityVersion-1); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, c := range []struct{ id, created, last string }{
		{"quiet", "2026-01-02T00:00:00.000Z", "2026-01-02T00:00:00.000Z"},
		{"busy", "2026-01-01T00:00:00.000Z", "2026-01-03T00:00:00.000Z"},
	} {
		data := `{"id":"` + c.id + `","epoch":"e","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdAt":"` + c.created + `"}`
		if _, err := raw.Exec(`INSERT INTO conversations (id, created_at, data, last_seq, state, epoch) VALUES ($1, $2, $3, 2, '{"lastSeq":2}', 'e')`, c.id, c.created, []byte(data)); err != nil {
			t.Fatal(err)
		}
		for seq, ts := range []string{c.created, c.last} {
			if _, err := raw.Exec(`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES ($1, $2, 'trace', 0, '', 'a', 'none', $3, '{}')`,
				c.id, seq+1, ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := open(t, url)
	recs, _, err := db.ListConversations(context.Background(), store.ListConversationsParams{})
	if err != nil || len(recs) != 2 || recs[0].Conversation.ID != "busy" || recs[1].Conversation.ID != "quiet" {
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.Conversation.ID)
		}
		t.Fatalf("after the upgrade: %v, %v; want [busy quiet]", ids, err)
	}
}
