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
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/sqlite"
)

// BenchmarkPostMessage measures decide + append + publish through the engine
// on a SQLite file, with one live subscriber per conversation, spreading 64
// concurrent writers over 1, 100 and 1000 conversations. Each message closes
// its turn, so any writer may write next (free policy).
func BenchmarkPostMessage(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
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
					_, err := eng.PostMessage(ctx, ids[i%n], conv.PostMessage{Actor: conv.Actor{AgentID: agent}, Role: parley.RoleAssistant, Parts: parts, Finality: parley.FinalityTurn})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkCeilingRawInsert is the ceiling for BenchmarkPostMessage, run in
// the same process: the same event rows (about the size of a 200-byte
// message event) inserted with plain SQL, 100 rows per transaction,
// interleaved over 1000 conversations. No rules, no projection, no state.
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
	data := []byte(`{"id":"01a2033a-715b-7559-959f-706d947185ce","role":"assistant","parts":[{"type":"text","text":"` + strings.Repeat("x", 200) + `"}]}`)
	seqs := make([]int64, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		tx, err := raw.Begin()
		if err != nil {
			b.Fatal(err)
		}
		st, err := tx.Prepare(`INSERT INTO events (conversation_id, seq, type, turn, turn_id, agent_id, finality, ts, data) VALUES (?, ?, 'message', ?, 't', 'a', 'turn', '2026-11-22T00:00:00.000Z', ?)`)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 100 && done < b.N; i, done = i+1, done+1 {
			c := done % 1000
			seqs[c]++
			if _, err := st.Exec(fmt.Sprintf("conv-%04d", c), seqs[c], seqs[c], data); err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
