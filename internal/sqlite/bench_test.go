package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// threadDB builds a conversation of n messages in chains of 100: each
// message replies to the one before it, and every hundredth starts a new
// chain; every thousandth starts its chain as a reply to m0, so m0 has n/1000
// replies. The rows go in with plain SQL in one transaction, which is fast.
func threadDB(b *testing.B, n int) (*sqlite.DB, string) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "thread.db")
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	raw, err := sql.Open("sqlite", path+"?_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	tx, err := raw.Begin()
	if err != nil {
		b.Fatal(err)
	}
	const conv = "c"
	if _, err := tx.Exec(`INSERT INTO conversations (id, created_at, data, state) VALUES ('c', '2026-01-01T00:00:00.000Z', '{"id":"c"}', '{}')`); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO heads (conversation_id, last_seq) VALUES ('c', ?)`, n); err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("x", 200)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%d", i)
		var replyTo any
		depth := i % 100
		switch {
		case depth > 0:
			replyTo = fmt.Sprintf("m%d", i-1)
		case i > 0 && i%1000 == 0:
			replyTo, depth = "m0", 1
		}
		m := parley.Message{ID: id, ConversationID: conv, Seq: int64(i + 1), Role: parley.RoleAssistant, AgentID: "a",
			Parts: []parley.Part{{Type: parley.PartText, Text: text + id}}, Status: parley.StatusComplete, Turn: i + 1, TurnID: id, Depth: depth, Finality: parley.FinalityTurn}
		if replyTo != nil {
			m.ReplyTo = replyTo.(string)
		}
		data, _ := json.Marshal(m)
		if _, err := ins.Exec(conv, id, i+1, id, replyTo, "a", depth, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return db, conv
}

// BenchmarkThread measures the thread look-ups at 10k and 1M messages:
// the 99 ancestors of a chain's last message, and a page of replies.
func BenchmarkThread(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		db, conv := threadDB(b, n)
		ctx := context.Background()
		last := fmt.Sprintf("m%d", n-1)
		b.Run(fmt.Sprintf("ancestors-99/messages=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				anc, err := db.Ancestors(ctx, store.ThreadParams{ConversationID: conv, MessageID: last})
				if err != nil || len(anc) != 99 {
					b.Fatalf("%d ancestors, %v", len(anc), err)
				}
			}
		})
		b.Run(fmt.Sprintf("replies-page/messages=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rs, err := db.ListReplies(ctx, store.ListRepliesParams{ConversationID: conv, MessageID: "m0", Limit: 100})
				if err != nil || len(rs) == 0 {
					b.Fatalf("%d replies, %v", len(rs), err)
				}
			}
		})
		b.Run(fmt.Sprintf("parent-lookup/messages=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := db.GetMessage(ctx, conv, last); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
