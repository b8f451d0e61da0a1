package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// BenchmarkReadEvents reads a log of 100,000 chunk events a page of 1000
// at a time, as a catch-up does: the cost of a page, with the look-up each
// row's reference to a message row may need (no row here has one).
func BenchmarkReadEvents(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "read.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const n, page = 100_000, 1000
	c := parley.Conversation{ID: "c", Epoch: "ep", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: parley.NewTime(time.Now())}
	created := parley.Event{ConversationID: "c", Seq: 1, Type: parley.EventTrace, AgentID: "a", Finality: parley.FinalityNone, Time: c.CreatedAt, Data: []byte(`{}`)}
	if err := db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{created}, State: []byte(`{}`)}); err != nil {
		b.Fatal(err)
	}
	for after := int64(1); after < n; after += page {
		var events []parley.Event
		for seq := after + 1; seq <= after+page; seq++ {
			events = append(events, parley.Event{ConversationID: "c", Seq: seq, Type: parley.EventChunk, Turn: 1, TurnID: "t", AgentID: "a", Finality: parley.FinalityNone,
				Time: c.CreatedAt, Data: []byte(fmt.Sprintf(`{"messageId":"m%d","content":"the quick brown fox jumps "}`, seq/100))})
		}
		if err := db.Append(ctx, store.AppendParams{ConversationID: "c", ExpectSeq: after, Events: events, State: []byte(`{}`)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		after := int64(i*page) % (n - page)
		got, err := db.ReadEvents(ctx, store.ReadEventsParams{ConversationID: "c", After: after, Limit: page})
		if err != nil || len(got) != page {
			b.Fatalf("%d events, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*page), "ns/event")
}
