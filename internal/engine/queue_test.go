package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// fillQueue queues n prompts in a conversation with no runner: they wait.
func fillQueue(t *testing.T, b *bundle, eng *engine.Engine, id string, n int) {
	t.Helper()
	for i := range n {
		if _, err := eng.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, Content: fmt.Sprint("question ", i)}); err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
	}
}

// deltaBytes streams a message of 20 deltas by bot and returns the bytes
// one delta's append hands to the store.
func deltaBytes(t *testing.T, b *bundle, eng *engine.Engine, cs *countingStore, id string) int64 {
	t.Helper()
	bot := conv.Actor{AgentID: "bot"}
	if _, err := eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: "r-" + id, Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	before := cs.bytes.Load()
	const n = 20
	for range n {
		if _, err := eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r-" + id, Delta: "a delta of text "}); err != nil {
			t.Fatal(err)
		}
	}
	return (cs.bytes.Load() - before) / n
}

// TestWritesDoNotRewriteTheQueue: a conversation whose prompt queue is full
// refuses one more prompt (busy, writing nothing), and each text delta
// streamed into it hands the store as many bytes as one into a conversation
// with no queue (the queue is written only by prompt events). After a
// restart, each conversation reads back as exactly the state its log folds
// to, by id and in the list.
func TestWritesDoNotRewriteTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	cs := &countingStore{Store: b.db}
	eng := engine.New(cs, engine.Options{})
	full, empty := b.conversation(t, parley.PolicyFree), b.conversation(t, parley.PolicyFree)
	limit := conv.DefaultLimits.MaxQueuedPrompts
	fillQueue(t, b, eng, full, limit)
	head := b.events(t, full)
	_, err := eng.EnqueuePrompt(b.ctx, full, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, Content: "one too many"})
	var perr *parley.Error
	if !errors.As(err, &perr) || perr.Code != parley.EBUSY || perr.Details["queueLength"] != limit {
		t.Fatalf("a prompt past the limit: %v", err)
	}
	if n := len(b.events(t, full)); n != len(head) {
		t.Fatalf("the refused prompt wrote %d events", n-len(head))
	}

	withQueue, without := deltaBytes(t, b, eng, cs, full), deltaBytes(t, b, eng, cs, empty)
	if withQueue > without+16 { // a few digits of seqs may differ
		t.Fatalf("a delta hands the store %d bytes with %d prompts queued and %d with none: it rewrites the queue", withQueue, limit, without)
	}
	eng.Close()

	again := engine.New(b.db, engine.Options{})
	defer again.Close()
	views, _, err := again.ListConversations(b.ctx, store.ListConversationsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{full, empty} {
		folded := conv.Evolve(conv.State{}, b.events(t, id)...)
		if err := again.ReadAt(b.ctx, id, func(_ store.Reader, s conv.State) error {
			if got, want := mustJSON(t, s), mustJSON(t, folded); got != want {
				return fmt.Errorf("state after a restart:\n%s\nthe log folds to\n%s", got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		g := folded.Guidance(time.Now())
		for _, v := range views {
			if v.Conversation.ID == id && (v.Head.LastSeq != folded.LastSeq || v.Guidance.NextAgentID != g.NextAgentID || v.Guidance.Kind != g.Kind) {
				t.Fatalf("listed after a restart: head %+v guidance %+v; the log says seq %d guidance %+v", v.Head, v.Guidance, folded.LastSeq, g)
			}
		}
	}
	if q, err := again.Prompts(b.ctx, full); err != nil || len(q) != limit {
		t.Fatalf("the queue after a restart holds %d prompts (%v), want %d", len(q), err, limit)
	}
}

// TestTaskFiringIntoAFullQueueIsSkipped: a task due while its
// conversation's queue is full writes nothing and moves to its next run.
func TestTaskFiringIntoAFullQueueIsSkipped(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	limits := conv.DefaultLimits
	limits.MaxQueuedPrompts = 2
	b := setup(t, engine.Options{Now: clk.Now, Limits: limits})
	id := b.conversation(t, parley.PolicyFree)
	fillQueue(t, b, b.eng, id, 2)
	sch := b.scheduler(clk)
	task, err := sch.CreateTask(b.ctx, parley.Task{ConversationID: id, AgentID: "cron", Prompt: "daily report", EveryMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	before := len(b.events(t, id))
	clk.add(time.Minute)
	go sch.RunTasks(b.ctx, 2*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := b.db.GetTask(b.ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.NextRunAt.After(task.NextRunAt.Time) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's firing into a full queue never moved it on")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(b.events(t, id)); n != before {
		t.Fatalf("a firing into a full queue wrote %d events", n-before)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
