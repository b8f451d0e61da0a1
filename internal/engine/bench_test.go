package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// BenchmarkPostMessage measures decide + append + publish through the engine
// on a SQLite file, with one live subscriber per conversation, spreading 64
// concurrent writers over 1, 100 and 1000 conversations. Each message closes
// its turn, so any writer may write next (free policy).
func BenchmarkPostMessage(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) {
			db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			benchPost(b, db, n)
			st := db.Stats()
			b.ReportMetric(float64(st.Writes)/float64(st.Batches), "writes/commit")
		})
	}
}

// BenchmarkPostMessagePostgres is BenchmarkPostMessage on PostgreSQL (a
// schema of its own in PARLEY_TEST_POSTGRES_URL; skipped without it).
func BenchmarkPostMessagePostgres(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) {
			db, err := postgres.Open(context.Background(), pgtest.Schema(b))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			benchPost(b, db, n)
		})
	}
}

// benchPost runs 64 writers over n conversations of s, each with a subscriber.
func benchPost(b *testing.B, db store.Store, n int) {
	b.Helper()
	ctx := context.Background()
	eng := engine.New(db, engine.Options{SubscriberBuffer: 1 << 20})
	defer eng.Close()
	ids := make([]string, n)
	for i := range ids {
		v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = v.Conversation.ID
		sub, err := eng.Subscribe(ctx, ids[i], nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range sub.C {
			}
		}()
	}
	parts := []parley.Part{{Type: parley.PartText, Text: strings.Repeat("x", 200)}}
	var next atomic.Int64
	b.SetParallelism(32) // 64 writers on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := next.Add(1)
		agent := fmt.Sprintf("w%d", w)
		for i := int(w); pb.Next(); i++ {
			_, err := eng.PostMessage(ctx, ids[i%n], conv.PostMessage{Actor: conv.Actor{AgentID: agent, Admin: true}, Role: parley.RoleAssistant, Parts: parts, Finality: parley.FinalityTurn})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkCeilingRawInsert is the ceiling for BenchmarkPostMessage, run in
// the same process: the same rows that one message writes (its event, its
// messages row with the same indexes, the conversation's seq and state) made
// with plain SQL, 100 messages per transaction, interleaved over 1000
// conversations. No rules, no look-ups, no JSON, no publishing.
func BenchmarkCeilingRawInsert(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "raw.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite", "file:"+db.Path()+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	const convs = 1000
	state := []byte(strings.Repeat("s", 400))
	for c := 0; c < convs; c++ {
		id := fmt.Sprintf("conv-%04d", c)
		if _, err := raw.Exec(`INSERT INTO conversations (id, created_at, data, state) VALUES (?, '2026-11-22T00:00:00.000Z', '{}', ?)`, id, state); err != nil {
			b.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO heads (conversation_id, last_seq) VALUES (?, 0)`, id); err != nil {
			b.Fatal(err)
		}
	}
	data := []byte(`{"id":"01a2033a-715b-7559-959f-706d947185ce","role":"assistant","parts":[{"type":"text","text":"` + strings.Repeat("x", 200) + `"}]}`)
	seqs := make([]int64, convs)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		tx, err := raw.Begin()
		if err != nil {
			b.Fatal(err)
		}
		ev, _ := tx.Prepare(`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES (?, ?, 'message', ?, 't', 'a', 'turn', '2026-11-22T00:00:00.000Z', ?)`)
		msg, _ := tx.Prepare(`INSERT INTO messages (conversation_id, id, seq, turn_id, reply_to, agent_id, depth, data) VALUES (?, ?, ?, ?, NULL, 'a', 0, ?)`)
		bump, _ := tx.Prepare(`UPDATE heads SET last_seq = ? WHERE conversation_id = ? AND last_seq = ?`)
		snap, _ := tx.Prepare(`UPDATE conversations SET state = ? WHERE id = ?`)
		for i := 0; i < 100 && done < b.N; i, done = i+1, done+1 {
			c := done % convs
			id := fmt.Sprintf("conv-%04d", c)
			seqs[c]++
			s := seqs[c]
			mid := fmt.Sprintf("m-%d", done)
			if _, err := ev.Exec(id, s, s, data); err != nil {
				b.Fatal(err)
			}
			if _, err := msg.Exec(id, mid, s, mid, data); err != nil {
				b.Fatal(err)
			}
			if _, err := bump.Exec(s, id, s-1); err != nil {
				b.Fatal(err)
			}
			if _, err := snap.Exec(state, id); err != nil {
				b.Fatal(err)
			}
		}
		ev.Close()
		msg.Close()
		snap.Close()
		bump.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkJoinSnapshot measures what a subscriber with no position costs
// while a message streams: its snapshot (the newest 100 messages, the
// streaming one assembled) is read under the conversation's write lock, so
// this is also how long one join holds the writers of that conversation.
func BenchmarkJoinSnapshot(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	eng := engine.New(db, engine.Options{})
	defer eng.Close()
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"a"}})
	if err != nil {
		b.Fatal(err)
	}
	id := v.Conversation.ID
	for i := range 150 {
		text := []parley.Part{{Type: parley.PartText, Text: strings.Repeat("word ", 60)}}
		if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "a"}, ID: fmt.Sprint("m", i), Role: parley.RoleAssistant, Parts: text, Finality: parley.FinalityTurn}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "a"}, ID: "live", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		b.Fatal(err)
	}
	for range 100 { // past a checkpoint: the row holds some, the chunks the rest
		if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: conv.Actor{AgentID: "a"}, MessageID: "live", Delta: "a 32-byte delta of streamed text"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		sub, err := eng.Subscribe(ctx, id, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(sub.Init.Messages); n != 100 {
			b.Fatalf("snapshot of %d messages", n)
		}
		sub.Close()
	}
}
