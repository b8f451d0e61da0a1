package engine_test

import (
	"context"
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
