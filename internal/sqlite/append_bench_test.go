package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	gosync "sync"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store/storetest"
)

// BenchmarkOneDeltaPerAppend measures the write path where no two deltas
// of a conversation arrive together, so none are written together: 1,000
// conversations, each streaming messages of 200 deltas one delta at a time
// (each waits for the last to be durable) through the engine. What limits
// it is the cost of an append, not of a delta: each writes its own chunk
// event and moves its own conversation's head, and the group commit takes
// up to 256 of them at once. It reports durable deltas (appends) per
// second, the appends per commit and the writer's time per append.
//
//	go test ./sqlite -run '^$' -bench OneDeltaPerAppend -benchtime 100000x
func BenchmarkOneDeltaPerAppend(b *testing.B) {
	for _, sync := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncNormal} {
		b.Run(string(sync), func(b *testing.B) {
			db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "p.db"), sqlite.Options{Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			eng := engine.New(db, engine.Options{})
			defer eng.Close()
			ctx := context.Background()
			const writers, perResponse = 1000, 200
			deltas := storetest.BenchDeltas(1000)
			var ids []string
			for range writers {
				v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"bot"}})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, v.Conversation.ID)
			}
			var n atomic.Int64
			var wg gosync.WaitGroup
			b.ResetTimer()
			st0 := db.Stats()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bot := conv.Actor{AgentID: "bot"}
					for r := 0; ; r++ {
						mid := fmt.Sprintf("r%d-%d", w, r)
						if _, err := eng.PostMessage(ctx, ids[w], conv.PostMessage{Actor: bot, ID: mid, Role: parley.RoleAssistant, Streaming: true}); err != nil {
							b.Error(err)
							return
						}
						for i := range perResponse {
							if n.Add(1) > int64(b.N) {
								return
							}
							if _, err := eng.StreamText(ctx, ids[w], conv.StreamText{Actor: bot, MessageID: mid, Delta: deltas[(r*perResponse+i)%len(deltas)]}); err != nil {
								b.Error(err)
								return
							}
						}
						if _, err := eng.FinalizeMessage(ctx, ids[w], conv.FinalizeMessage{Actor: bot, MessageID: mid, Reason: parley.FinishEndTurn}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			st := db.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
			b.ReportMetric(float64(st.Writes-st0.Writes)/float64(st.Batches-st0.Batches), "writes/batch")
			// The writer's time per append: what an append costs, less
			// swayed than the rate by what else the machine runs.
			b.ReportMetric(float64((st.Busy-st0.Busy).Microseconds())/float64(st.Writes-st0.Writes), "writer-µs/append")
		})
	}
}
