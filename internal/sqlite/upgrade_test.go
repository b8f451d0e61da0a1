package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/storetest"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// oldDB makes a database file at migration version, and returns its path
// and a connection of the plain driver to it (closed with the test).
func oldDB(t *testing.T, version int64) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := sqlite.MigrateTo(context.Background(), path, version); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return path, raw
}

// TestUpgradeMovesQueues: a database whose state snapshots hold their
// prompt queues is opened with the current code, which moves each queue to
// its own table (storetest.UpgradeMovesQueues), and back down.
func TestUpgradeMovesQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, storetest.QueuedVersion)
	storetest.UpgradeMovesQueues(t, raw, database.DialectSQLite3, sqlite.Migrations(), func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// TestUpgradeIndexesMessages: the messages of a database made before
// search are found once the current code has opened it
// (storetest.UpgradeIndexesMessages).
func TestUpgradeIndexesMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, storetest.SearchVersion-1)
	storetest.UpgradeIndexesMessages(t, raw, func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// TestUpgradeKeepsRowsWithContent: rows written with their content before
// rows left it out read, search and leave the index as before
// (storetest.UpgradeKeepsRowsWithContent), and the full-text index agrees
// with its rows after.
func TestUpgradeKeepsRowsWithContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, storetest.RowTextVersion-1)
	storetest.UpgradeKeepsRowsWithContent(t, raw, func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
	if _, err := raw.Exec(`INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("the index disagrees with its rows: %v", err)
	}
}

// TestDowngradePutsRowsBack: undoing the rows without content and the
// references to rows gives back what was written
// (storetest.DowngradePutsRowsBack).
func TestDowngradePutsRowsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.DowngradePutsRowsBack(t, raw, database.DialectSQLite3, sqlite.Migrations(), func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// TestSearchTextUnchangedByUpgrade: the view the full-text index reads its
// text from was rewritten to do less work (migration 15); for rows of
// every shape, odd ones included, it must give what the view before gave,
// else the index would be told to delete words it never held. Rows are
// written under the view before (which indexes them), the database is
// opened with the current code, and the view's rows, the index's own check
// and the index after rows are changed and deleted are compared.
func TestSearchTextUnchangedByUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, 14)
	raw.SetMaxOpenConns(1)
	rows := []string{
		`{"status":"complete","parts":[{"type":"text","text":"first words"},{"type":"tool-call","callId":"x"},{"type":"text","text":" then more"}]}`,
		`{"status":"complete","parts":[{"type":"text","text":"a\u0000b"},{"type":"text","text":"c\\u0000d\u0002e\u0003f"}]}`,
		`{"status":"complete","parts":[{"type":"text"},{"type":"text","text":"after an empty part"}]}`,
		`{"status":"complete","parts":[{"type":"text","text":null},{"type":"text","text":"after a null"}]}`,
		`{"status":"complete","parts":[1,"x",[2],{"type":"text","text":5},{"type":"text","text":{"a":1}}]}`,
		`{"status":"complete","parts":{"a":{"type":"text","text":"in an object"}}}`,
		`{"status":"complete","parts":"a string"}`,
		`{"status":"complete"}`,
		`{"parts":[{"type":"text","text":"no status"}]}`,
		`{"status":"complete","content":"given content","parts":[{"type":"text","text":"other"}]}`,
		`{"status":"complete","content":null,"parts":[{"type":"text","text":"null content"}]}`,
		`{"status":"complete","content":"","parts":[{"type":"text","text":"empty content"}]}`,
		`{"status":"streaming","parts":[{"type":"text","text":"still streaming"}]}`,
		`{"status":"canceled","parts":[]}`,
		`{"status":"complete","parts":[{"type":"text","text":""}]}`,
		`{"status":"complete","parts":[{"type":"text","text":"` + strings.Repeat("long ", 20000) + `"}]}`,
	}
	for i, d := range rows {
		if _, err := raw.Exec(`INSERT INTO messages (conversation_id, id, seq, turn_id, agent_id, depth, data) VALUES ('c', ?, ?, '', 'a', 0, ?)`, fmt.Sprint(i), i+1, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[int64]string {
		t.Helper()
		rs, err := raw.Query(`SELECT rid, conv, body FROM message_search_text`)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		got := map[int64]string{}
		for rs.Next() {
			var rid int64
			var conv, body string
			if err := rs.Scan(&rid, &conv, &body); err != nil {
				t.Fatal(err)
			}
			got[rid] = conv + "|" + body
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := read()
	if len(before) != 6 {
		t.Fatalf("the view before gave %d rows; the test's rows are not what it thinks", len(before))
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var version int64
	if err := raw.QueryRow(`SELECT max(version_id) FROM goose_db_version`).Scan(&version); err != nil || version < 15 {
		t.Fatalf("not upgraded: version %d, %v", version, err)
	}
	var streaming string
	if err := raw.QueryRow(`SELECT group_concat(id) FROM messages WHERE streaming`).Scan(&streaming); err != nil || streaming != "12" {
		t.Fatalf("rows marked streaming by the upgrade: %q (%v), want the one streaming row, 12", streaming, err)
	}
	if after := read(); !maps.Equal(before, after) {
		for rid, b := range before {
			if after[rid] != b {
				t.Errorf("row %d: before %.80q, after %.80q", rid, b, after[rid])
			}
		}
		t.Fatalf("the view gives other text: %d rows before, %d after", len(before), len(after))
	}
	// The rows a raw write notes for the index are indexed by the store:
	// here, by its Close.
	check := func(when string) {
		t.Helper()
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		var noted int
		if err := raw.QueryRow(`SELECT count(*) FROM search_pending`).Scan(&noted); err != nil || noted != 0 {
			t.Fatalf("%s: %d rows still noted for the index after Close (%v)", when, noted, err)
		}
		if _, err := raw.Exec(`INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)`); err != nil {
			t.Fatalf("%s: the index disagrees with its rows: %v", when, err)
		}
	}
	check("after the upgrade")
	if _, err := raw.Exec(`UPDATE messages SET seq = seq + 100`); err != nil {
		t.Fatal(err)
	}
	check("after every row was rewritten")
	if _, err := raw.Exec(`DELETE FROM messages WHERE rowid % 2 = 0`); err != nil {
		t.Fatal(err)
	}
	check("after half the rows were deleted")
	var hits int
	if err := raw.QueryRow(`SELECT count(*) FROM message_search WHERE message_search MATCH 'then OR null OR given'`).Scan(&hits); err != nil || hits == 0 {
		t.Fatalf("search after the upgrade: %d hits, %v", hits, err)
	}
}

// headsVersion is the schema version that moved each conversation's head
// out of its conversations row into heads.
const headsVersion = 18

// TestHeadsApart: a database made before heads keeps its conversations'
// heads when the current code opens it; an append moves the head without
// writing the conversations row unless it brings a state snapshot; and
// undoing the migration puts the head back in the row.
func TestHeadsApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, headsVersion-1)
	conv := `{"id":"c1","epoch":"e","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdAt":"2026-01-01T00:00:00.000Z"}`
	for _, q := range []string{
		`INSERT INTO conversations (id, created_at, data, last_seq, state, epoch) VALUES ('c1', '2026-01-01T00:00:00.000Z', '` + conv + `', 1, '{"lastSeq":1}', 'e')`,
		`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES ('c1', 1, 'conversation.created', 0, '', '', 'none', '2026-01-01T00:00:00.000Z', '` + conv + `')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := db.Head(ctx, "c1"); err != nil || h != (store.Head{Seq: 1, Epoch: "e"}) {
		t.Fatalf("head after the upgrade: %+v, %v", h, err)
	}
	// Count the writes of conversations rows from here on.
	for _, q := range []string{
		`CREATE TABLE row_writes (n INTEGER)`,
		`CREATE TRIGGER count_row_writes AFTER UPDATE ON conversations BEGIN INSERT INTO row_writes VALUES (1); END`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rowWrites := func() (n int) {
		t.Helper()
		if err := raw.QueryRow(`SELECT count(*) FROM row_writes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ev := func(seq int64) parley.Event {
		return parley.Event{ConversationID: "c1", Seq: seq, Type: parley.EventTrace, Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: []byte(`{}`)}
	}
	if err := db.Append(ctx, store.AppendParams{ConversationID: "c1", ExpectSeq: 1, Epoch: "e", Events: []parley.Event{ev(2)}}); err != nil {
		t.Fatal(err)
	}
	if h, err := db.Head(ctx, "c1"); err != nil || h.Seq != 2 || rowWrites() != 0 {
		t.Fatalf("after an append without a snapshot: head %+v (%v), %d writes of the row; want seq 2 and none", h, err, rowWrites())
	}
	if err := db.Append(ctx, store.AppendParams{ConversationID: "c1", ExpectSeq: 2, Epoch: "e", Events: []parley.Event{ev(3)}, State: []byte(`{"lastSeq":3}`)}); err != nil {
		t.Fatal(err)
	}
	rec, err := db.GetConversation(ctx, "c1")
	if err != nil || rec.LastSeq != 3 || string(rec.State) != `{"lastSeq":3}` || rowWrites() != 1 {
		t.Fatalf("after an append with a snapshot: %+v (%v), %d writes of the row; want seq 3, its snapshot, one", rec, err, rowWrites())
	}
	// An append decided on an old head or for another epoch moves nothing.
	for _, p := range []store.AppendParams{
		{ConversationID: "c1", ExpectSeq: 2, Epoch: "e", Events: []parley.Event{ev(3)}},
		{ConversationID: "c1", ExpectSeq: 3, Epoch: "other", Events: []parley.Event{ev(4)}},
	} {
		if err := db.Append(ctx, p); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Fatalf("append at %d for epoch %q: %v, want a conflict", p.ExpectSeq, p.Epoch, err)
		}
	}
	if h, err := db.Head(ctx, "c1"); err != nil || h.Seq != 3 {
		t.Fatalf("head after refused appends: %+v, %v", h, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	p, err := goose.NewProvider(database.DialectSQLite3, raw, sqlite.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, headsVersion-1); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := raw.QueryRow(`SELECT last_seq FROM conversations WHERE id = 'c1'`).Scan(&seq); err != nil || seq != 3 {
		t.Fatalf("last_seq after undoing heads: %d, %v; want 3", seq, err)
	}
}

// namesVersion is the migration that made the table of names.
const namesVersion = 19

// TestUpgradeTakesNames: the ids of the messages and prompts of a database
// made before names are taken once the current code has opened it
// (storetest.UpgradeTakesNames).
func TestUpgradeTakesNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, namesVersion-1)
	storetest.UpgradeTakesNames(t, raw, func() store.Store {
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// outboxStatusVersion is the schema version that gave outbox rows a
// status, so that a delivery can be given up and a done row removed.
const outboxStatusVersion = 20

// TestUpgradeKeepsDeliveries: the outbox rows of a database made before
// they had a status read as delivered or pending once the current code
// has opened it (storetest.UpgradeKeepsDeliveries).
func TestUpgradeKeepsDeliveries(t *testing.T) {
	t.Parallel()
	path, raw := oldDB(t, outboxStatusVersion-1)
	storetest.UpgradeKeepsDeliveries(t, raw, func() store.Store {
		db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// lastActivityVersion is the schema version that keeps each
// conversation's last activity in its head.
const lastActivityVersion = 22

// TestUpgradeKeepsLastActivity: a database made before the list by last
// activity lists its conversations by the time of their last event once
// the current code opens it (the migration reads it from the log).
func TestUpgradeKeepsLastActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, lastActivityVersion-1)
	for _, c := range []struct{ id, created, last string }{
		{"quiet", "2026-01-02T00:00:00.000Z", "2026-01-02T00:00:00.000Z"},
		{"busy", "2026-01-01T00:00:00.000Z", "2026-01-03T00:00:00.000Z"},
	} {
		data := `{"id":"` + c.id + `","epoch":"e","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdAt":"` + c.created + `"}`
		for _, q := range []string{
			`INSERT INTO conversations (id, created_at, data, state, epoch) VALUES ('` + c.id + `', '` + c.created + `', '` + data + `', '{"lastSeq":2}', 'e')`,
			`INSERT INTO heads (conversation_id, last_seq) VALUES ('` + c.id + `', 2)`,
			`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES ('` + c.id + `', 1, 'conversation.created', 0, '', '', 'none', '` + c.created + `', '{}')`,
			`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES ('` + c.id + `', 2, 'trace', 0, '', 'a', 'none', '` + c.last + `', '{}')`,
		} {
			if _, err := raw.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs, _, err := db.ListConversations(ctx, store.ListConversationsParams{})
	if err != nil || len(recs) != 2 || recs[0].Conversation.ID != "busy" || recs[1].Conversation.ID != "quiet" {
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.Conversation.ID)
		}
		t.Fatalf("after the upgrade: %v, %v; want [busy quiet]", ids, err)
	}
}
