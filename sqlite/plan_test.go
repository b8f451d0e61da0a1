package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestThreadWalksUseIndexes checks that each step of the recursive thread
// walks is an index probe, never a scan of the messages table.
func TestThreadWalksUseIndexes(t *testing.T) {
	t.Parallel()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, q := range map[string]string{"ancestors": ancestorsQuery, "descendants": descendantsQuery} {
		rows, err := db.r.Query("EXPLAIN QUERY PLAN "+q, "c", "m", 10)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
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
	}
}
