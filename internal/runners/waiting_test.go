package runners_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/teststore"
)

// readCounter is a store that counts the event reads made of it.
type readCounter struct {
	store.Store
	reads atomic.Int64
}

func (s *readCounter) ReadEvents(ctx context.Context, p store.ReadEventsParams) ([]parley.Event, error) {
	s.reads.Add(1)
	return s.Store.ReadEvents(ctx, p)
}

// TestPromptWaitingBehindAStreamReadsNothing: a prompt queued while its
// runner streams a message waits for the message's end. Each delta of the
// message asks whether the prompt may go now; the answer is no, and asking
// reads nothing from the store (it once read the prompt's text and decided
// a dispatch at every delta). Once the message ends the prompt goes, with
// its text.
func TestPromptWaitingBehindAStreamReadsNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := &readCounter{Store: teststore.Open(t)}
	eng := engine.New(st, engine.Options{})
	rn := runners.New(eng, st, runners.Options{})
	t.Cleanup(func() { rn.Close(); eng.Close() })
	b := &bundle{db: st, eng: eng, runners: rn, ctx: ctx}
	id := b.conversation(t)
	frames := make(chan []byte, 64)
	detach := rn.Attach(id, "bot", func(f []byte) { frames <- f })
	defer detach()
	startStreaming(t, b, eng, id)
	if _, err := eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "p1", Content: "what next?"}); err != nil {
		t.Fatal(err)
	}
	bot := conv.Actor{AgentID: "bot"}
	before := st.reads.Load()
	const deltas = 50
	for range deltas {
		if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: "r1", Delta: "more "}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the dispatches kicked run in the background
	if n := st.reads.Load() - before; n > 2 {
		t.Errorf("%d event reads while %d deltas streamed past a waiting prompt; want none", n, deltas)
	}
	select {
	case f := <-frames:
		t.Fatalf("a prompt was pushed while the runner's message held the floor: %s", f)
	default:
	}
	if _, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r1", Reason: parley.FinishEndTurn}); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-frames:
		var p struct{ Type, MessageID, Content string }
		if err := json.Unmarshal(f, &p); err != nil || p.Type != "prompt" || p.MessageID != "p1" || p.Content != "what next?" {
			t.Fatalf("after the message ended the runner got %s", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the prompt was not pushed once the message ended")
	}
}
