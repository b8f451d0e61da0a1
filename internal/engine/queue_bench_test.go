package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// BenchmarkDeltaWithQueue streams 32-byte text deltas into one conversation
// whose prompt queue holds no prompt or as many as the default limit
// allows (waiting: no runner is attached), on SQLite and on PostgreSQL
// (skipped without PARLEY_TEST_POSTGRES_URL). Each op is one delta:
// decide, append, publish; every 500 deltas the message is finalized and a
// new one starts. It reports the bytes each append hands to the store
// (events, message rows, state snapshot, queue): they must not grow with
// the queue.
func BenchmarkDeltaWithQueue(b *testing.B) {
	open := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(b *testing.B) store.Store {
			db, err := postgres.Open(context.Background(), pgtest.Schema(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		for _, n := range []int{0, conv.DefaultLimits.MaxQueuedPrompts} {
			b.Run(fmt.Sprintf("store=%s/queued=%d", name, n), func(b *testing.B) {
				benchDeltas(b, open[name](b), n)
			})
		}
	}
}

func benchDeltas(b *testing.B, db store.Store, queued int) {
	ctx := context.Background()
	cs := &countingStore{Store: db}
	eng := engine.New(cs, engine.Options{})
	defer eng.Close()
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		b.Fatal(err)
	}
	id := v.Conversation.ID
	for i := range queued {
		if _, err := eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, Content: fmt.Sprint("question ", i)}); err != nil {
			b.Fatal(err)
		}
	}
	bot := conv.Actor{AgentID: "bot"}
	msg := 0
	start := func() {
		msg++
		if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: fmt.Sprint("r", msg), Role: parley.RoleAssistant, Streaming: true}); err != nil {
			b.Fatal(err)
		}
	}
	start()
	before, ops := cs.bytes.Load(), 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: fmt.Sprint("r", msg), Delta: "a 32-byte delta of streamed text"}); err != nil {
			b.Fatal(err)
		}
		if ops++; ops%500 == 0 {
			if _, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: fmt.Sprint("r", msg), Reason: parley.FinishEndTurn}); err != nil {
				b.Fatal(err)
			}
			start()
		}
	}
	b.ReportMetric(float64(cs.bytes.Load()-before)/float64(ops), "bytes/delta")
}
