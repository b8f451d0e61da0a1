package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// queryPlan returns the steps of SQLite's plan for q.
func queryPlan(t *testing.T, db *DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.r.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return plan
}

func openPlanDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestQueriesUseIndexes checks the query plans of the look-ups that must
// stay cheap at millions of messages.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	db := openPlanDB(t)
	cases := map[string]struct{ query, index string }{
		"GetMessage":        {`SELECT data FROM messages WHERE conversation_id = 'c' AND id = 'm'`, "messages_by_id"},
		"ListMessages":      {`SELECT data FROM messages WHERE conversation_id = 'c' AND seq > 0 ORDER BY seq LIMIT 10`, "messages_by_seq"},
		"ListMessagesTurn":  {`SELECT data FROM messages WHERE conversation_id = 'c' AND seq > 0 AND turn_id = 't' ORDER BY seq LIMIT 10`, "messages_by_turn_id"},
		"ListMessagesAgent": {`SELECT data FROM messages WHERE conversation_id = 'c' AND seq > 0 AND agent_id = 'a' ORDER BY seq LIMIT 10`, "messages_by_agent"},
		"ListReplies":       {`SELECT data FROM messages WHERE conversation_id = 'c' AND reply_to = 'm' AND seq > 0 ORDER BY seq LIMIT 10`, "messages_by_reply_to"},
		"ReadEvents": {`SELECT e.seq, e.data, CASE WHEN e.ref IS NOT NULL THEN (SELECT m.data FROM messages m WHERE m.conversation_id = e.conversation_id AND m.id = e.ref) END
			FROM events e WHERE e.conversation_id = 'c' AND e.seq > 0 ORDER BY e.seq LIMIT 10`, "events_by_seq"},
		"ReadEventsRef": {`SELECT e.seq, e.data, CASE WHEN e.ref IS NOT NULL THEN (SELECT m.data FROM messages m WHERE m.conversation_id = e.conversation_id AND m.id = e.ref) END
			FROM events e WHERE e.conversation_id = 'c' AND e.seq > 0 ORDER BY e.seq LIMIT 10`, "messages_by_id"},
	}
	for name, c := range cases {
		text := strings.Join(queryPlan(t, db, c.query), "; ")
		if !strings.Contains(text, "INDEX "+c.index) || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan %q does not use index %s (or sorts)", name, text, c.index)
		}
	}
}

// TestThreadWalksUseIndexes checks that each step of the recursive thread
// walks, and the read of their rows, is an index probe, never a scan of
// the messages table.
func TestThreadWalksUseIndexes(t *testing.T) {
	t.Parallel()
	db := openPlanDB(t)
	for name, q := range map[string]struct {
		query string
		args  []any
	}{
		"ancestors":   {ancestorRefsQuery, []any{"c", "m", 10}},
		"descendants": {descendantRefsQuery, []any{"c", "m", 0, 10}},
		"rows by id":  {rowsByIDQuery, []any{"c", `["m1","m2"]`}},
	} {
		plan := queryPlan(t, db, q.query, q.args...)
		text := strings.Join(plan, "; ")
		for _, step := range plan {
			// A search on the conversation alone reads all its messages.
			if step == "SCAN m" || step == "SCAN messages" || strings.HasSuffix(step, "(conversation_id=?)") {
				t.Errorf("%s reads whole conversations (%q): %s", name, step, text)
			}
		}
		if !strings.Contains(text, "INDEX messages_by_id") {
			t.Errorf("%s does not use messages_by_id: %s", name, text)
		}
		if name == "descendants" && !strings.Contains(text, "INDEX messages_by_reply_to") {
			t.Errorf("descendants does not use messages_by_reply_to: %s", text)
		}
		// The rows are read unsorted: a sort would copy each into SQLite's sorter.
		if name == "rows by id" && strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("the rows of a thread are sorted: %s", text)
		}
	}
}

// TestConversationReadsProbeTheQueue checks that reading a conversation
// with its prompt queue (kept in a table of its own) is one probe of each
// table, and that a page of conversations walks the newest-first index
// without sorting.
func TestConversationReadsProbeTheQueue(t *testing.T) {
	t.Parallel()
	db := openPlanDB(t)
	get := strings.Join(queryPlan(t, db, getConversationQuery, "c"), "; ")
	page := strings.Join(queryPlan(t, db, listConversationsQuery+` AND (c.created_at, c.id) < (?, ?) ORDER BY c.created_at DESC, c.id DESC LIMIT ?`, "t", "c", 10), "; ")
	for name, plan := range map[string]string{"GetConversation": get, "ListConversations": page} {
		if !strings.Contains(plan, "SEARCH q USING INDEX sqlite_autoindex_queues_1 (conversation_id=?)") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan %q does not probe the queue by its key (or sorts)", name, plan)
		}
	}
	if !strings.Contains(get, "sqlite_autoindex_conversations_1 (id=?)") || !strings.Contains(page, "INDEX conversations_newest") {
		t.Errorf("plans %q and %q do not find the conversations by their indexes", get, page)
	}
}

// TestIndexingReadsTheNotedRowsAlone checks that indexing the rows noted
// for the search index makes the text of those rows alone, each found by
// its rowid, not of every message (the view makes a row's text as it
// reads it).
func TestIndexingReadsTheNotedRowsAlone(t *testing.T) {
	t.Parallel()
	db := openPlanDB(t)
	plan := strings.Join(queryPlan(t, db, indexNotedQuery, 10), "; ")
	if !strings.Contains(plan, "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)") || strings.Contains(plan, "SCAN m") {
		t.Errorf("indexing the noted rows reads messages by %q", plan)
	}
	chunk := strings.Join(queryPlan(t, db, notedChunkQuery, 10, indexChunk), "; ")
	if !strings.Contains(chunk, "search_pending USING INTEGER PRIMARY KEY (rowid<?)") || strings.Contains(chunk, "TEMP B-TREE") {
		t.Errorf("a chunk of noted rows is found by %q", chunk)
	}
}

// TestListByActivityUsesItsIndex: the list by last activity reads its
// pages from heads_by_activity in order, filtered or not, never sorting
// all conversations.
func TestListByActivityUsesItsIndex(t *testing.T) {
	t.Parallel()
	db := openPlanDB(t)
	for name, q := range map[string]string{
		"all": listConversationsQuery + ` ORDER BY h.last_at DESC, h.conversation_id DESC LIMIT 10`,
		"after a cursor, of a member, by metadata": listConversationsQuery +
			` AND EXISTS (SELECT 1 FROM conversation_members m WHERE m.conversation_id = h.conversation_id AND m.agent_id = 'a')
			AND EXISTS (SELECT 1 FROM json_each(` + dataJSON + `, '$.metadata') j WHERE j.key = 'k' AND j.type = 'text' AND j.value = 'v')
			AND (h.last_at, h.conversation_id) < ('2026', 'c') ORDER BY h.last_at DESC, h.conversation_id DESC LIMIT 10`,
	} {
		text := strings.Join(queryPlan(t, db, q), "; ")
		if !strings.Contains(text, "INDEX heads_by_activity") || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan %q does not read heads_by_activity in order", name, text)
		}
	}
}
