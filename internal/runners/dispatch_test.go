package runners_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/teststore"
)

// bundle is an engine and its runners on a store of their own: a SQLite
// file, or with PARLEY_TEST_STORE=postgres a PostgreSQL schema.
type bundle struct {
	db      store.Store
	eng     *engine.Engine
	runners *runners.Dispatcher
	ctx     context.Context
}

func setup(t *testing.T, opts runners.Options) *bundle {
	t.Helper()
	return setupOn(t, teststore.Open(t), opts)
}

// setupOn is setup on the store db (a test's wrapper of one).
func setupOn(t *testing.T, db store.Store, opts runners.Options) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	eng := engine.New(db, engine.Options{})
	rn := runners.New(eng, db, opts)
	t.Cleanup(func() { rn.Close(); eng.Close() })
	return &bundle{db: db, eng: eng, runners: rn, ctx: ctx}
}

// conversation makes a free conversation of bot, and a human who asks.
func (b *bundle) conversation(t *testing.T) string {
	t.Helper()
	v, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Participants: []string{"bot"}, Members: []string{"human"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	return v.Conversation.ID
}

// silent is a runner connection that drops what it is sent.
func silent([]byte) {}

// startStreaming opens a streaming message r1 by bot with some text.
func startStreaming(t *testing.T, b *bundle, eng *engine.Engine, id string) {
	t.Helper()
	bot := conv.Actor{AgentID: "bot"}
	if _, err := eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: "r1", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r1", Delta: "half an ans"}); err != nil {
		t.Fatal(err)
	}
}

// waitFinal reads a subscription until r1 is finalized and returns it.
func waitFinal(t *testing.T, sub *engine.Subscription) *parley.Message {
	t.Helper()
	for it := range sub.C {
		if it.Event == nil || it.Event.Type != parley.EventMessageUpdated {
			continue
		}
		var m parley.Message
		if err := json.Unmarshal(it.Event.Data, &m); err != nil {
			t.Fatal(err)
		}
		if m.Status != parley.StatusStreaming {
			return &m
		}
	}
	t.Fatalf("subscription ended: %v", sub.Err())
	return nil
}

func TestOrphanedStreamEndsCanceledAfterGrace(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{Grace: 50 * time.Millisecond})
	id := b.conversation(t)
	detach := b.runners.Attach(id, "bot", silent)
	startStreaming(t, b, b.eng, id)
	sub, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	detach()
	m := waitFinal(t, sub)
	if m.Status != parley.StatusCanceled || m.Content != "half an ans" || m.Parts[len(m.Parts)-1].Reason != parley.FinishCanceled || m.Finality != parley.FinalityTurn {
		t.Fatalf("orphan finalized as %+v", m)
	}
	if v, _ := b.eng.Conversation(b.ctx, id); v.Head.OpenTurn != nil {
		t.Fatalf("the runner's turn is still open: %+v", v.Head.OpenTurn)
	}
}

func TestRunnerBackWithinGraceContinues(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{Grace: 200 * time.Millisecond})
	id := b.conversation(t)
	detach := b.runners.Attach(id, "bot", silent)
	startStreaming(t, b, b.eng, id)
	detach()
	defer b.runners.Attach(id, "bot", silent)() // back before the grace period ends
	time.Sleep(400 * time.Millisecond)          // past it: the timer must have found the runner back
	res, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Delta: "wer"})
	if err != nil {
		t.Fatalf("the returning runner cannot continue: %v", err)
	}
	if res.Message.Content != "half an answer" || res.Message.Status != parley.StatusStreaming {
		t.Fatalf("continued message = %+v", res.Message)
	}
}

// TestRecoverStreamsAfterRestart: a new engine on the same store (a restart)
// finds the streaming message and ends it once its runner stays away.
func TestRecoverStreamsAfterRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{})
	id := b.conversation(t)
	defer b.runners.Attach(id, "bot", silent)() // attached to the old engine: the new one knows nothing of it
	startStreaming(t, b, b.eng, id)

	next := engine.New(b.db, engine.Options{})
	defer next.Close()
	defer runners.New(next, b.db, runners.Options{Grace: 50 * time.Millisecond}).Close()
	sub, err := next.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	n, err := next.RecoverStreams(b.ctx)
	if err != nil || n < 1 {
		t.Fatalf("RecoverStreams found %d conversations, %v", n, err)
	}
	if m := waitFinal(t, sub); m.Status != parley.StatusCanceled || m.Content != "half an ans" {
		t.Fatalf("recovered orphan finalized as %+v", m)
	}
}

// TestPromptFollowsAReconnectedRunner: a runner that reconnects before its
// old connection is found dead gets the prompt the old one was given, once
// the old one detaches; a connection that held no prompt leaves nothing
// behind when it goes.
func TestPromptFollowsAReconnectedRunner(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{})
	id := b.conversation(t)
	pushes := func() (func([]byte), <-chan string) {
		c := make(chan string, 8)
		return func(f []byte) {
			var p struct{ Type, MessageID string }
			_ = json.Unmarshal(f, &p)
			c <- p.Type + " " + p.MessageID
		}, c
	}
	next := func(c <-chan string) string {
		t.Helper()
		select {
		case s := <-c:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no frame pushed in 10 s")
			return ""
		}
	}
	push1, got1 := pushes()
	detach1 := b.runners.Attach(id, "bot", push1)
	if _, err := b.eng.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "p1", Content: "q"}); err != nil {
		t.Fatal(err)
	}
	if f := next(got1); f != "prompt p1" {
		t.Fatalf("first connection got %q", f)
	}
	push2, got2 := pushes()
	detach2 := b.runners.Attach(id, "bot", push2) // the old one is not known dead yet
	push3, got3 := pushes()
	detach3 := b.runners.Attach(id, "bot", push3)
	detach1()
	if f := next(got3); f != "prompt p1" {
		t.Fatalf("after the old connection left, the newest got %q", f)
	}
	detach2() // held no prompt: nothing moves
	if _, err := b.eng.CompletePrompt(b.ctx, id, conv.CompletePrompt{Actor: conv.Actor{AgentID: "bot"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-got2:
		t.Fatalf("a connection that left was pushed %q", f)
	case f := <-got3:
		t.Fatalf("after complete, %q", f)
	case <-time.After(100 * time.Millisecond):
	}
	detach3()
	q, err := b.eng.Prompts(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 0 {
		t.Fatalf("queue after complete = %+v", q)
	}
}

// TestCollectPromptFromAnotherNode: a collect prompt queued on node A waits
// its window, then goes to the runner attached to node B, though nothing is
// written after it: B, hearing of it, waits for the window itself.
func TestCollectPromptFromAnotherNode(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{})
	id := b.conversation(t)
	other := engine.New(b.db, engine.Options{Shared: true})
	defer other.Close()
	otherRunners := runners.New(other, b.db, runners.Options{})
	defer otherRunners.Close()
	got := make(chan string, 4)
	defer otherRunners.Attach(id, "bot", func(f []byte) {
		var p struct{ Type, MessageID string }
		_ = json.Unmarshal(f, &p)
		got <- p.Type + " " + p.MessageID
	})()
	r, err := b.eng.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "p1", Content: "q", Mode: conv.ModeCollect, Window: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other.CatchUp(id, r.Seq) // what the broker tells node B
	select {
	case f := <-got:
		if f != "prompt p1" {
			t.Fatalf("B's runner got %q", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the collect prompt never reached the runner on the other node")
	}
}

// TestStreamingRunnerWithoutItsLeaseIsNotOrphaned: a runner streams
// through node A, whose record of its runners is not in the store (a node
// slow to write it). Node B follows the conversation and sees the message
// streaming with no runner attached anywhere it can tell; but the runner
// keeps writing, so B's grace periods pass and B leaves the message alone.
// Once the runner stops writing for longer than a lease, B ends the
// message canceled.
func TestStreamingRunnerWithoutItsLeaseIsNotOrphaned(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{})
	id := b.conversation(t)
	a := engine.New(b.db, engine.Options{Shared: true}) // node A, with no dispatcher: no lease
	defer a.Close()
	other := engine.New(b.db, engine.Options{Shared: true})
	defer other.Close()
	defer runners.New(other, b.db, runners.Options{Grace: 20 * time.Millisecond, PresenceLease: 2 * time.Second}).Close()
	sub, err := other.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	startStreaming(t, b, a, id)
	v, err := a.Conversation(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	other.CatchUp(id, v.Head.LastSeq) // B hears of the message: its grace period starts
	bot := conv.Actor{AgentID: "bot"}
	for i := range 20 { // about 20 of B's grace periods
		r, err := a.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r1", Delta: "."})
		if err != nil {
			t.Fatalf("delta %d: node B ended the message of a runner that writes: %v", i, err)
		}
		other.CatchUp(id, r.Seq) // what the broker tells node B
		time.Sleep(20 * time.Millisecond)
	}
	if m := waitFinal(t, sub); m.Status != parley.StatusCanceled || m.Content != "half an ans"+strings.Repeat(".", 20) {
		t.Fatalf("the message of a runner gone silent ended %+v", m)
	}
}
