package storetest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// QueuedVersion is the last schema version that kept the prompt queue in the
// state snapshot; the next one moves it to a table of its own.
const QueuedVersion = 5

// queuedState returns a conversation's state with two prompts in its queue,
// one being answered, and its snapshot as a store of QueuedVersion holds it
// (the queue inside).
func queuedState(t *testing.T) (conv.State, []byte) {
	s := conv.State{LastSeq: 4, LastTurn: 1, LastClosedSeq: 3, LastOwner: "human", LastTurnID: "p1", Queue: []parley.QueuedPrompt{
		{ID: "p1", Mode: conv.ModeFollowup, AgentID: "human", Parts: []int64{2}, Runner: "bot", Written: true},
		{ID: "p2", Mode: conv.ModeCollect, AgentID: "human", To: "bot", Channel: &parley.Channel{Type: "slack", ID: "C1"}, Parts: []int64{4}},
	}}
	return s, []byte(mustJSON(t, s))
}

// UpgradeMovesQueues is the upgrade test of every backend. raw is a
// database at QueuedVersion, reached through database/sql with goose's
// dialect; migrations are the backend's; open opens it as a store with the
// current code, which migrates it. Two conversations are written at
// QueuedVersion, one whose snapshot holds a queue of two prompts and one
// with none. After the upgrade the first reads back as the same state, its
// queue kept apart and out of the snapshot, and the second has no queue.
// Undoing the migration puts the queue back in the snapshot. The
// conversations' epochs, in their data, are in their heads too.
func UpgradeMovesQueues(t *testing.T, raw *sql.DB, dialect database.Dialect, migrations fs.FS, open func() store.Store) {
	t.Helper()
	want, old := queuedState(t)
	for id, state := range map[string][]byte{"queued": old, "empty": []byte(`{"lastSeq":1}`)} {
		c := `{"id":"` + id + `","epoch":"e","participants":[],"turnPolicy":"free","messageFormat":"v2","createdAt":"2026-01-01T00:00:00.000Z"}`
		if _, err := raw.Exec(`INSERT INTO conversations (id, created_at, data, last_seq, state) VALUES ($1, $2, $3, 1, $4)`,
			id, "2026-01-01T00:00:00.000Z", []byte(c), state); err != nil {
			t.Fatal(err)
		}
	}

	s := open()
	// The epoch, in the conversation's data before, is in its head too.
	if h, err := s.Head(ctx(t), "queued"); err != nil || h != (store.Head{Seq: 1, Epoch: "e"}) {
		t.Fatalf("Head after the upgrade = %+v, %v; want seq 1 of epoch e", h, err)
	}
	rec, err := s.GetConversation(ctx(t), "queued")
	if err != nil {
		t.Fatal(err)
	}
	got, err := conv.DecodeStored(rec.State, rec.Queue)
	if err != nil || mustJSON(t, got) != mustJSON(t, want) {
		t.Fatalf("after the upgrade the state reads %s (%v), want %s", mustJSON(t, got), err, mustJSON(t, want))
	}
	if bytes.Contains(rec.State, []byte(`"queue"`)) || rec.Queue == nil {
		t.Fatalf("the queue was not moved out of the snapshot: state %s queue %s", rec.State, rec.Queue)
	}
	if rec, err := s.GetConversation(ctx(t), "empty"); err != nil || rec.Queue != nil {
		t.Fatalf("a conversation with no queue has %q after the upgrade (%v)", rec.Queue, err)
	}
	s.Close()

	p, err := goose.NewProvider(dialect, raw, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(context.Background(), QueuedVersion); err != nil {
		t.Fatal(err)
	}
	var snapshot []byte
	if err := raw.QueryRow(`SELECT state FROM conversations WHERE id = 'queued'`).Scan(&snapshot); err != nil {
		t.Fatal(err)
	}
	var back conv.State
	if err := json.Unmarshal(snapshot, &back); err != nil || mustJSON(t, back) != mustJSON(t, want) {
		t.Fatalf("after the downgrade the snapshot is %s (%v), want %s", snapshot, err, mustJSON(t, want))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// SearchVersion is the schema version that indexes message text for
// search.
const SearchVersion = 9

// UpgradeIndexesMessages is the search's upgrade test of every backend.
// raw is a database at SearchVersion-1, reached through database/sql; open
// opens it as a store with the current code, which migrates it. The
// messages written before the upgrade are found after it: the finished
// ones (one with a NUL character in its text), not the one still
// streaming.
func UpgradeIndexesMessages(t *testing.T, raw *sql.DB, open func() store.Store) {
	t.Helper()
	c := `{"id":"old","epoch":"e","title":"before search","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdAt":"2026-01-01T00:00:00.000Z"}`
	if _, err := raw.Exec(`INSERT INTO conversations (id, created_at, data, last_seq, state) VALUES ($1, $2, $3, 4, $4)`,
		"old", "2026-01-01T00:00:00.000Z", []byte(c), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO conversation_members (agent_id, created_at, conversation_id) VALUES ('a', $1, 'old')`, "2026-01-01T00:00:00.000Z"); err != nil {
		t.Fatal(err)
	}
	at := parley.NewTime(t0.Time)
	streaming := said("old", "streaming", "a", "upgraded words so far", at)
	streaming.Status = parley.StatusStreaming
	oldRows(t, raw, said("old", "done", "a", "upgraded words in full", at), said("old", "nul", "a", "upgraded\x00 words \\u0000 too", at), streaming)
	s := open()
	defer s.Close()
	for _, p := range []store.SearchParams{{}, {ConversationID: "old"}, {Member: "a"}} {
		hits := byID(search(t, s, p, "upgraded words"))
		wantHits(t, fmt.Sprintf("after the upgrade, %+v", p), hits, "done", "nul")
		if hits[0].ConversationTitle != "before search" || hits[0].Seq != 2 {
			t.Fatalf("the hit says %+v", hits[0])
		}
	}
}

// oldRows writes message rows as a database from before RowTextVersion
// holds them (their JSON whole, content included), at seqs 2, 3, …
func oldRows(t *testing.T, raw *sql.DB, ms ...*parley.Message) {
	t.Helper()
	for i, m := range ms {
		m.Seq = int64(i + 2)
		if _, err := raw.Exec(`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data) VALUES ($1, $2, $3, $4, NULL, $5, 0, $6)`,
			m.ConversationID, m.ID, m.Seq, m.TurnID, m.AgentID, []byte(mustJSON(t, m))); err != nil {
			t.Fatal(err)
		}
	}
}

// byID sorts hits by message id, for tests whose hits rank alike.
func byID(hits []parley.SearchHit) []parley.SearchHit {
	slices.SortFunc(hits, func(a, b parley.SearchHit) int { return strings.Compare(a.MessageID, b.MessageID) })
	return hits
}

// RowTextVersion is the schema version whose message rows leave their
// content out when it is the text of their text parts.
const RowTextVersion = 13

// UpgradeKeepsRowsWithContent is the upgrade test of rows written before
// RowTextVersion, which all hold their content: raw is a database at
// RowTextVersion-1, open opens it with the current code. The old rows read
// as they were written and are found by search; one is removed (a revert)
// and leaves the index, one written now (its content left out) enters it.
func UpgradeKeepsRowsWithContent(t *testing.T, raw *sql.DB, open func() store.Store) {
	t.Helper()
	c := `{"id":"old","epoch":"e","title":"rows with content","participants":["a"],"turnPolicy":"free","messageFormat":"v2","createdAt":"2026-01-01T00:00:00.000Z"}`
	if _, err := raw.Exec(`INSERT INTO conversations (id, created_at, data, last_seq, state, epoch) VALUES ($1, $2, $3, 3, $4, 'e')`,
		"old", "2026-01-01T00:00:00.000Z", []byte(c), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO conversation_members (agent_id, created_at, conversation_id) VALUES ('a', $1, 'old')`, "2026-01-01T00:00:00.000Z"); err != nil {
		t.Fatal(err)
	}
	at := parley.NewTime(t0.Time)
	kept, gone := said("old", "kept", "a", "upgraded words <kept> & \x00 found", at), said("old", "gone", "a", "upgraded words then reverted", at)
	oldRows(t, raw, kept, gone)
	s := open()
	defer s.Close()
	hits := byID(search(t, s, store.SearchParams{ConversationID: "old"}, "upgraded words"))
	wantHits(t, "after the upgrade", hits, "gone", "kept")
	got, err := s.GetMessage(ctx(t), "old", "kept")
	if err != nil || mustJSON(t, got) != mustJSON(t, kept) {
		t.Fatalf("the old row reads as %s (%v), want %s", mustJSON(t, got), err, mustJSON(t, kept))
	}
	now := said("old", "now", "a", "upgraded words written now", at)
	now.Seq = 4
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: "old", ExpectSeq: 3, Events: []parley.Event{event("old", 4, "a")},
		Messages: []*parley.Message{now}, RemoveMessages: []string{"gone"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hits = byID(search(t, s, store.SearchParams{ConversationID: "old"}, "upgraded words"))
	wantHits(t, "after a revert and a new row", hits, "kept", "now")
	ms, err := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: "old", Limit: 10})
	if err != nil || len(ms) != 2 || mustJSON(t, ms[0]) != mustJSON(t, kept) || mustJSON(t, ms[1]) != mustJSON(t, now) {
		t.Fatalf("the rows read as %v (%v)", ms, err)
	}
}

// DowngradePutsRowsBack is the test of undoing RowTextVersion and the
// references to rows: open opens a new store with the current code, raw
// is its database, migrations the backend's. A log whose ended message's
// event was stored as a reference to its row (when it was written: its
// data is empty) is compacted and migrated down to RowTextVersion-1: every
// event that was not compacted holds its JSON as written again, and every
// row holds its content.
func DowngradePutsRowsBack(t *testing.T, raw *sql.DB, dialect database.Dialect, migrations fs.FS, open func() store.Store) {
	t.Helper()
	s := open()
	end1 := t0.Add(10 * time.Second)
	id, written := streamLog(t, s, end1)
	var refs []string
	rs, err := raw.Query(`SELECT seq, ref, length(data) FROM events WHERE conversation_id = $1 AND ref IS NOT NULL ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var seq, size int64
		var ref string
		if err := rs.Scan(&seq, &ref, &size); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, fmt.Sprintf("%d %s %d", seq, ref, size))
	}
	if err := errors.Join(rs.Err(), rs.Close()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(refs) != "[10 r1 0]" {
		t.Fatalf("events stored as references to rows (seq, ref, data bytes): %v, want r1's message.updated alone", refs)
	}
	compact(t, s, id, end1.Add(48*time.Hour), 24*time.Hour, 0)
	s.Close()
	p, err := goose.NewProvider(dialect, raw, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(context.Background(), RowTextVersion-1); err != nil {
		t.Fatal(err)
	}
	rows, err := raw.Query(`SELECT seq, type, data FROM events WHERE conversation_id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	same := func(a, b []byte) bool {
		var x, y any
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && mustJSON(t, x) == mustJSON(t, y)
	}
	for rows.Next() {
		var seq int64
		var typ string
		var data []byte
		if err := rows.Scan(&seq, &typ, &data); err != nil {
			t.Fatal(err)
		}
		if w := written[seq-1]; typ != parley.EventCompacted && !same(data, w.Data) {
			t.Fatalf("after the downgrade event %d holds %s, want %s", seq, data, w.Data)
		}
	}
	var r1 []byte
	if err := raw.QueryRow(`SELECT data FROM messages WHERE conversation_id = $1 AND id = 'r1'`, id).Scan(&r1); err != nil {
		t.Fatal(err)
	}
	if !same(r1, written[9].Data) {
		t.Fatalf("after the downgrade r1's row is %s, want %s", r1, written[9].Data)
	}
}

// UpgradeTakesNames is the upgrade test of the names every message and
// prompt takes: raw is a database at the version before them. After the
// upgrade the ids of the messages it holds, and of the messages and prompts
// its log made (reverted, withdrawn, stored by reference to their row),
// are taken; the ids chunks name are not.
func UpgradeTakesNames(t *testing.T, raw *sql.DB, open func() store.Store) {
	t.Helper()
	const ts = "2026-01-01T00:00:00.000Z"
	row := said("old", "kept", "a", "words", parley.NewTime(t0.Time))
	if _, err := raw.Exec(`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data) VALUES ('old', 'kept', 2, 'kept', NULL, 'a', 0, $1)`,
		[]byte(mustJSON(t, row))); err != nil {
		t.Fatal(err)
	}
	events := []struct {
		seq        int64
		typ, data  string
		ref        any
		conversing string
	}{
		{2, parley.EventMessage, `{"id":"kept","role":"assistant"}`, nil, "old"},
		{3, parley.EventMessage, `{"id":"reverted","role":"user"}`, nil, "old"},
		{4, parley.EventPromptQueued, `{"id":"withdrawn","content":"x \u0000 y"}`, nil, "old"},
		{5, parley.EventMessage, ``, "byref", "old"},
		{6, parley.EventChunk, `{"messageId":"chunked","content":"x"}`, nil, "old"},
		{2, parley.EventPromptQueued, `{"id":"elsewhere","content":"x"}`, nil, "other"},
	}
	for _, e := range events {
		if _, err := raw.Exec(`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data, ref) VALUES ($1, $2, $3, 0, '', 'a', 'none', $4, $5, $6)`,
			e.conversing, e.seq, e.typ, ts, []byte(e.data), e.ref); err != nil {
			t.Fatal(err)
		}
	}
	s := open()
	defer s.Close()
	for _, c := range []struct {
		conversation, id string
		taken            bool
	}{{"old", "kept", true}, {"old", "reverted", true}, {"old", "withdrawn", true}, {"old", "byref", true}, {"old", "chunked", false},
		{"old", "elsewhere", false}, {"other", "elsewhere", true}} {
		got, err := s.IDTaken(ctx(t), c.conversation, c.id)
		if err != nil || got != c.taken {
			t.Errorf("after the upgrade, id %s of %s taken = %v (%v), want %v", c.id, c.conversation, got, err, c.taken)
		}
	}
}
