package runners_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/teststore"
)

// BenchmarkAgentRunnerConnect measures what an agent-wide runner's connect
// and disconnect cost the node (AttachAgent, then its detach) while it
// holds N conversations in its cache, none of which the agent takes part
// in: what a reconnect storm of such an agent costs. It should not grow
// with N.
//
//	go test -run '^$' -bench AgentRunnerConnect ./dispatch
func BenchmarkAgentRunnerConnect(b *testing.B) {
	for _, n := range []int{0, 1000, 20000} {
		b.Run(fmt.Sprintf("cached=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db := teststore.Open(b)
			eng := engine.New(db, engine.Options{})
			rn := runners.New(eng, db, runners.Options{})
			b.Cleanup(func() { rn.Close(); eng.Close() })
			cacheConversations(b, ctx, eng, n)
			ghost := conv.Actor{AgentID: "ghost"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, detach := rn.AttachAgent(ghost, silent, open)
				detach()
			}
		})
	}
}

// cacheConversations makes n conversations of other agents and loads each
// into eng's cache.
func cacheConversations(b *testing.B, ctx context.Context, eng *engine.Engine, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	const workers = 32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				v, err := eng.CreateConversation(ctx, parley.Conversation{Participants: []string{fmt.Sprintf("bot%d", i)}, TurnPolicy: parley.PolicyFree})
				if err == nil {
					_, err = eng.Conversation(ctx, v.Conversation.ID)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
