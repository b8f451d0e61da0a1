package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// searchDB opens a store in a new file, with conversation "c" created by
// one trace event (seq 1); appends to it use traces.
func searchDB(t *testing.T) (string, *sqlite.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parley.db")
	db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := parley.Conversation{ID: "c", Epoch: "e", TurnPolicy: parley.PolicyFree, MessageFormat: "v2"}
	if err := db.CreateConversation(context.Background(), store.CreateConversationParams{Conversation: c, Events: traces(1), State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// traces is conversation "c"'s trace event at seq, as an append's events.
func traces(seq int64) []parley.Event { return []parley.Event{trace("c", seq)} }

// TestSearchIndexSurvivesVacuum: the search index names message rows by
// their rowid, so VACUUM (which an operator may run on the file) must keep
// them. A database whose messages were written, rewritten and partly
// removed is vacuumed; its index then passes FTS5's own check against the
// rows, and finds what it found before.
func TestSearchIndexSurvivesVacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db := searchDB(t)
	var ms []*parley.Message
	for i := range 40 {
		text := fmt.Sprintf("vacuumed word%d", i)
		ms = append(ms, &parley.Message{ID: fmt.Sprintf("m%d", i), ConversationID: "c", Seq: 2, Role: parley.RoleUser, AgentID: "a",
			Content: text, Parts: []parley.Part{{Type: parley.PartText, Text: text}}, Status: parley.StatusComplete, Finality: parley.FinalityNone})
	}
	var removed []string
	for i := 0; i < 40; i += 3 {
		removed = append(removed, ms[i].ID)
	}
	for _, p := range []store.AppendParams{
		{ConversationID: "c", ExpectSeq: 1, Events: traces(2), Messages: ms, State: []byte(`{}`)},
		{ConversationID: "c", ExpectSeq: 2, Events: traces(3), RemoveMessages: removed, State: []byte(`{}`)},
	} {
		if err := db.Append(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	find := func(db store.Store) int {
		q, _ := store.ParseSearch("vacuumed")
		hits, err := db.Search(ctx, store.SearchParams{Query: q, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if h.Snippet[0].Text != "vacuumed" || h.Snippet[1].Text != " word"+h.MessageID[1:] {
				t.Fatalf("message %s has the snippet %+v", h.MessageID, h.Snippet)
			}
		}
		return len(hits)
	}
	before := find(db)
	db.Close()
	if before != 40-len(removed) {
		t.Fatalf("found %d messages before, want %d", before, 40-len(removed))
	}

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{`VACUUM`, `INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	db, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if after := find(db); after != before {
		t.Fatalf("found %d messages after VACUUM, %d before", after, before)
	}
}

// TestSearchSkipsStreamingRows: a message row records whether it is
// streaming, and the index's triggers trust that column to leave a
// streaming row alone without reading its JSON. A message is written
// streaming, finished, edited and removed; after each step the column
// says what the row's status says, search finds the message only once it
// is finished, and FTS5's own check agrees with the rows.
func TestSearchSkipsStreamingRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db := searchDB(t)
	defer db.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	msg := func(seq int64, status parley.MessageStatus, text string) *parley.Message {
		return &parley.Message{ID: "m", ConversationID: "c", Seq: 2, UpdatedSeq: seq, Role: parley.RoleAssistant, AgentID: "a",
			Content: text, Parts: []parley.Part{{Type: parley.PartText, Text: text}}, Status: status, Finality: parley.FinalityNone}
	}
	seq := int64(1)
	step := func(name string, p store.AppendParams, wantStreaming, wantHits int) {
		t.Helper()
		p.ConversationID, p.ExpectSeq, p.Events, p.State = "c", seq, traces(seq+1), []byte(`{}`)
		seq++
		if err := db.Append(ctx, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var streaming int
		if err := raw.QueryRow(`SELECT count(*) FROM messages WHERE streaming`).Scan(&streaming); err != nil || streaming != wantStreaming {
			t.Fatalf("%s: %d rows marked streaming (%v), want %d", name, streaming, err, wantStreaming)
		}
		q, _ := store.ParseSearch("midstream")
		hits, err := db.Search(ctx, store.SearchParams{Query: q, Limit: 10})
		if err != nil || len(hits) != wantHits {
			t.Fatalf("%s: %d hits (%v), want %d", name, len(hits), err, wantHits)
		}
		if _, err := raw.Exec(`INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)`); err != nil {
			t.Fatalf("%s: the index disagrees with its rows: %v", name, err)
		}
	}
	step("streaming", store.AppendParams{Messages: []*parley.Message{msg(2, parley.StatusStreaming, "midstream words")}}, 1, 0)
	step("more text", store.AppendParams{Messages: []*parley.Message{msg(3, parley.StatusStreaming, "midstream words and more")}}, 1, 0)
	step("finished", store.AppendParams{Messages: []*parley.Message{msg(4, parley.StatusComplete, "midstream words and more")}}, 0, 1)
	step("edited", store.AppendParams{Messages: []*parley.Message{msg(5, parley.StatusComplete, "midstream words, edited")}}, 0, 1)
	step("removed", store.AppendParams{RemoveMessages: []string{"m"}}, 0, 0)
}

// TestNotedRowsAreIndexed: a row's text enters the search index a moment
// after it is written (the write notes the row; the store indexes what is
// noted in batches). Rows are written and changed behind the store's back,
// as a crash between a write and its indexing would leave them: some
// noted and then changed or deleted before they are indexed, some
// indexed and then changed or deleted. Opened again, the store indexes
// what is noted without being asked (no search runs until every note is
// gone), its searches find each row's text as it is now and nothing else,
// and FTS5's own check agrees with the rows.
func TestNotedRowsAreIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db := searchDB(t)
	db.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	insert := func(id, text string) {
		t.Helper()
		exec(`INSERT INTO messages (conversation_id, id, seq, turn_id, agent_id, depth, data) VALUES ('c', ?, 2, '', 'a', 0, ?)`,
			id, `{"status":"complete","content":"`+text+`"}`)
	}
	noted := func() int {
		t.Helper()
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM search_pending`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Indexed: the store indexes what is noted as it closes.
	for _, id := range []string{"i1", "i2", "i3"} {
		insert(id, "indexed "+id)
	}
	if n := noted(); n != 3 {
		t.Fatalf("%d rows noted after three inserts, want 3", n)
	}
	if db, err = sqlite.Open(ctx, path, sqlite.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if n := noted(); n != 0 {
		t.Fatalf("%d rows still noted after Close", n)
	}
	// Noted, not indexed.
	for _, id := range []string{"n1", "n2", "n3"} {
		insert(id, "noted "+id)
	}
	for _, kind := range []string{"i", "n"} {
		exec(`UPDATE messages SET data = ? WHERE id = ?`, `{"status":"complete","content":"changed `+kind+`2"}`, kind+"2")
		exec(`DELETE FROM messages WHERE id = ?`, kind+"3")
	}
	if n := noted(); n != 3 { // n1, n2 and the changed i2
		t.Fatalf("%d rows noted after the changes, want 3", n)
	}

	if db, err = sqlite.Open(ctx, path, sqlite.Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(30 * time.Second); noted() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows still noted 30 s after Open, and nothing searched", noted())
		}
	}
	for q, want := range map[string][]string{
		"indexed": {"i1"},
		"noted":   {"n1"},
		"changed": {"i2", "n2"},
		"i3":      nil,
		"n3":      nil,
		"n2":      {"n2"},
	} {
		sq, _ := store.ParseSearch(q)
		hits, err := db.Search(ctx, store.SearchParams{Query: sq, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.MessageID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("search %q found %v, want %v", q, got, want)
		}
	}
	exec(`INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)`)
}
