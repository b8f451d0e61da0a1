package retention_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/retention"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// streamed writes n conversations, each with one message streamed in
// deltas deltas and ended, and returns their ids.
func streamed(t *testing.T, ctx context.Context, eng *engine.Engine, n, deltas int) []string {
	t.Helper()
	var ids []string
	bot := conv.Actor{AgentID: "bot"}
	for range n {
		v, err := eng.CreateConversation(ctx, parley.Conversation{Participants: []string{"bot"}, TurnPolicy: parley.PolicyFree})
		if err != nil {
			t.Fatal(err)
		}
		id := v.Conversation.ID
		if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: "r", Role: parley.RoleAssistant, Streaming: true}); err != nil {
			t.Fatal(err)
		}
		for range deltas {
			if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: "r", Delta: "word "}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r", Reason: parley.FinishEndTurn}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// tombstones counts the compacted events of a conversation.
func tombstones(t *testing.T, ctx context.Context, db store.Store, id string) int {
	t.Helper()
	evs, err := db.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
		if e.Type == parley.EventCompacted {
			n++
		}
	}
	return n
}

// TestPassesAreBoundedAndGoRound: nothing is compacted within the
// retention; past it, passes that each look at two conversations and a few
// rows go round every conversation, pick up where they ran out of budget,
// and leave every delta a tombstone; once done, a pass finds nothing due.
func TestPassesAreBoundedAndGoRound(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eng := engine.New(db, engine.Options{})
	defer eng.Close()
	ids := streamed(t, ctx, eng, 5, 30)

	now := time.Now()
	clock := func() time.Time { return now }
	sw := retention.New(db, retention.Options{Retention: time.Hour, Conversations: 2, Rows: 24, RowsPerWrite: 8, Now: clock})
	for range 5 {
		if st, err := sw.Pass(ctx); err != nil || st.Events != 0 {
			t.Fatalf("within the retention: %+v, err %v", st, err)
		}
	}
	now = now.Add(2 * time.Hour)
	passes, total := 0, int64(0)
	for ; passes < 100; passes++ {
		st, err := sw.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Conversations > 2 {
			t.Fatalf("a pass compacted %d conversations, over its bound of 2", st.Conversations)
		}
		total += st.Events
		if total == 5*30 {
			break
		}
	}
	if total != 5*30 || passes < 5 {
		t.Fatalf("%d events compacted in %d passes; want 150, in more than one pass each", total, passes+1)
	}
	for _, id := range ids {
		if n := tombstones(t, ctx, db, id); n != 30 {
			t.Fatalf("conversation %s has %d tombstones, want 30", id, n)
		}
	}
	for range 6 {
		if st, err := sw.Pass(ctx); err != nil || st.Conversations != 0 {
			t.Fatalf("once done: %+v, err %v", st, err)
		}
	}
}
