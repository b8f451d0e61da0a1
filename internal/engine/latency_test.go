package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/sqlite"
)

// BenchmarkDeltaLatency streams text deltas into 1000 conversations at once
// (64 writers, one streaming message and one subscriber per conversation)
// and reports the time from StreamText being called to the subscriber
// receiving the chunk: p50, p99 and p999, durable commit included.
func BenchmarkDeltaLatency(b *testing.B) {
	const convs = 1000
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "lat.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	eng := engine.New(db, engine.Options{SubscriberBuffer: 1 << 20})
	defer eng.Close()
	ids := make([]string, convs)
	var mu sync.Mutex
	var lat []time.Duration
	var received atomic.Int64
	for i := range ids {
		v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{fmt.Sprintf("bot%d", i)}})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = v.Conversation.ID
		if _, err := eng.PostMessage(ctx, ids[i], conv.PostMessage{Actor: conv.Actor{AgentID: fmt.Sprintf("bot%d", i)}, ID: "r", Role: parley.RoleAssistant, Streaming: true}); err != nil {
			b.Fatal(err)
		}
		sub, err := eng.Subscribe(ctx, ids[i], nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for it := range sub.C {
				if it.Event == nil || it.Event.Type != parley.EventChunk {
					continue
				}
				var c parley.Chunk
				_ = json.Unmarshal(it.Event.Data, &c)
				sent, _ := strconv.ParseInt(c.Content, 10, 64)
				d := time.Since(time.Unix(0, sent))
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				received.Add(1)
			}
		}()
	}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % convs
			// Each conversation has one writer at a time in real life; here the
			// engine serializes writers of one conversation as it must.
			_, err := eng.StreamText(ctx, ids[i], conv.StreamText{Actor: conv.Actor{AgentID: fmt.Sprintf("bot%d", i)}, MessageID: "r",
				Delta: strconv.FormatInt(time.Now().UnixNano(), 10)})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	for received.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(0.999), "p999-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
}
