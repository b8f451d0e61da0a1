package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestAskAndWaitAcrossNodes: two nodes of the binary on one PostgreSQL
// database. A prompt asked through node B waits there for its answer
// while a runner attached to node A answers it: the wait ends when the
// prompt does, and B's view names A's runner (presence, from the runner
// leases), and names none once it left.
func TestAskAndWaitAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 2, "-runner-lease", "600ms")
	a, b := nodes[0].client(), nodes[1].client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, run := assistantAnswersThrough(ctx, t, b, a)
	for {
		v, err := b.Conversation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Guidance != nil && slices.Equal(v.Guidance.Runners, []string{"assistant"}) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node B never named node A's runner: guidance %+v", v.Guidance)
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() {
		p, err := run.Next(ctx)
		if err != nil || p.Type != "prompt" {
			return
		}
		// Slow enough that B's wait is under way before the answer ends.
		time.Sleep(300 * time.Millisecond)
		if _, err := run.Create(ctx, "r1"); err != nil {
			return
		}
		_, _ = run.Text(ctx, "r1", "4")
		_, _ = run.Finalize(ctx, "r1", parley.FinishEndTurn, "")
		_, _ = run.Complete(ctx)
	}()
	ans, err := b.AskAndWait(ctx, id, client.NewPrompt{ID: "q1", AgentID: "human", Content: "What is 2 + 2?"})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Status.State != client.PromptStateCompleted || ans.Status.Runner != "assistant" || ans.Message == nil || ans.Message.ID != "r1" || ans.Message.Content != "4" {
		t.Fatalf("asked through B, answered through A: %+v, message %+v", ans.Status, ans.Message)
	}
	run.Close()
	for {
		v, err := b.Conversation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Guidance != nil && len(v.Guidance.Runners) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node B still names a runner after it left: guidance %+v", v.Guidance)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
