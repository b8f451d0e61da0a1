package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/sqlite"
	"github.com/parleyhq/parley/store"
)

// countingStore counts the bytes each append hands to the store: event
// data, message rows (as JSON) and the state snapshot.
type countingStore struct {
	store.Store
	bytes atomic.Int64
}

func (c *countingStore) Append(ctx context.Context, p store.AppendParams) error {
	n := len(p.State)
	for _, e := range p.Events {
		n += len(e.Data)
	}
	for _, m := range p.Messages {
		b, _ := json.Marshal(m)
		n += len(b)
	}
	c.bytes.Add(int64(n))
	return c.Store.Append(ctx, p)
}

// BenchmarkWriteAmplification streams one message of 50, 500 and 5000
// deltas of 40 bytes and reports the bytes written to the store per byte of
// streamed text, beside the same figure for seed 001's own design (rewrite
// the whole parts row on every delta), computed in the same run from the
// same message as it grows.
func BenchmarkWriteAmplification(b *testing.B) {
	for _, n := range []int{50, 500, 5000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "amp.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			cs := &countingStore{Store: db}
			eng := engine.New(cs, engine.Options{})
			defer eng.Close()
			delta := strings.Repeat("y", 39) + " "
			bot := conv.Actor{AgentID: "bot"}
			var stored, seed, text int64
			for i := 0; i < b.N; i++ {
				v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree})
				if err != nil {
					b.Fatal(err)
				}
				id := v.Conversation.ID
				start := cs.bytes.Load()
				if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: "r", Role: parley.RoleAssistant, Streaming: true}); err != nil {
					b.Fatal(err)
				}
				for d := 0; d < n; d++ {
					res, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: "r", Delta: delta})
					if err != nil {
						b.Fatal(err)
					}
					row, _ := json.Marshal(res.Message) // seed 001: UPDATE messages SET parts = ? on every delta
					seed += int64(len(row))
				}
				if _, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r", Reason: parley.FinishEndTurn}); err != nil {
					b.Fatal(err)
				}
				stored += cs.bytes.Load() - start
				text += int64(n * len(delta))
			}
			b.ReportMetric(float64(stored)/float64(text), "parley-bytes/text-byte")
			b.ReportMetric(float64(seed)/float64(text), "seed-bytes/text-byte")
		})
	}
}
