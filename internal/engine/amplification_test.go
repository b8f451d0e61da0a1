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
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// countingStore counts the bytes each append hands to the store: event
// data, message rows (as JSON), the state snapshot and the prompt queue.
type countingStore struct {
	store.Store
	bytes atomic.Int64
}

func (c *countingStore) Append(ctx context.Context, p store.AppendParams) error {
	n := len(p.State) + len(p.Queue)
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

// AppendAsync is Append, on a goroutine of its own.
func (c *countingStore) AppendAsync(p store.AppendParams, done func(error)) {
	go func() { done(c.Append(context.Background(), p)) }()
}

// bot writes the streamed messages of the amplification benchmarks.
var bot = conv.Actor{AgentID: "bot"}

// countingEngine is an engine on a new SQLite file whose appends are
// counted; both are closed when the benchmark ends.
func countingEngine(b *testing.B) (*engine.Engine, *countingStore) {
	db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "amp.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cs := &countingStore{Store: db}
	eng := engine.New(cs, engine.Options{})
	b.Cleanup(func() { eng.Close(); db.Close() })
	return eng, cs
}

// streamInCountedStore creates a conversation and starts bot's streaming message
// "r" in it; start is what the store had counted before.
func streamInCountedStore(b *testing.B, eng *engine.Engine, cs *countingStore) (id string, start int64) {
	ctx := context.Background()
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"bot"}})
	if err != nil {
		b.Fatal(err)
	}
	start = cs.bytes.Load()
	if _, err := eng.PostMessage(ctx, v.Conversation.ID, conv.PostMessage{Actor: bot, ID: "r", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		b.Fatal(err)
	}
	return v.Conversation.ID, start
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
			eng, cs := countingEngine(b)
			delta := strings.Repeat("y", 39) + " "
			var stored, seed, text int64
			for i := 0; i < b.N; i++ {
				id, start := streamInCountedStore(b, eng, cs)
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

// BenchmarkToolCallAmplification streams one message of 10 or 30 tool
// calls, each with 30 KiB of args and 1 KiB of result, updated three times
// (pending, running, completed; the runner sends the args again each
// time), with a little text between them, then finalizes it. It reports the
// bytes handed to the store (events, rows at checkpoints, the finalize,
// state snapshots) per byte of the final message in JSON, beside what the
// same updates cost when each one wrote the whole message again as a
// message.updated event and its row (computed in the same run from the
// same message as it grows).
func BenchmarkToolCallAmplification(b *testing.B) {
	for _, calls := range []int{10, 30} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) { toolCallAmplification(b, calls) })
	}
}

func toolCallAmplification(b *testing.B, calls int) {
	ctx := context.Background()
	eng, cs := countingEngine(b)
	args := json.RawMessage(`{"page":"` + strings.Repeat("a", 30<<10) + `"}`)
	result := json.RawMessage(`"` + strings.Repeat("r", 1<<10) + `"`)
	var stored, whole, size int64
	for i := 0; i < b.N; i++ {
		id, start := streamInCountedStore(b, eng, cs)
		for c := range calls {
			u := conv.ToolUpdate{CallID: fmt.Sprintf("call-%d", c), ToolName: "fetch", Args: args}
			for _, status := range []string{parley.ToolPending, parley.ToolRunning, parley.ToolCompleted} {
				u.Status = status
				if status == parley.ToolCompleted {
					u.Result = result
				}
				res, err := eng.StreamTool(ctx, id, conv.StreamTool{Actor: bot, MessageID: "r", Tool: u})
				if err != nil {
					b.Fatal(err)
				}
				row, _ := json.Marshal(res.Message) // the whole message, as an event and as a row
				whole += 2 * int64(len(row))
			}
			if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: "r", Delta: "Read it. "}); err != nil {
				b.Fatal(err)
			}
		}
		res, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r", Reason: parley.FinishEndTurn})
		if err != nil {
			b.Fatal(err)
		}
		final, _ := json.Marshal(res.Message)
		stored += cs.bytes.Load() - start
		size += int64(len(final))
	}
	b.ReportMetric(float64(stored)/float64(size), "parley-bytes/message-byte")
	b.ReportMetric(float64(whole)/float64(size), "whole-message-bytes/message-byte")
	b.ReportMetric(float64(size)/float64(b.N), "message-bytes")
}
