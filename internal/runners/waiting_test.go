package runners_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
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
	st := &readCounter{Store: teststore.Open(t)}
	b := setupOn(t, st, runners.Options{})
	id := b.conversation(t)
	frames := make(chan []byte, 64)
	detach := b.runners.Attach(id, "bot", func(f []byte) { frames <- f })
	startStreaming(t, b, b.eng, id)
	if _, err := b.eng.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "p1", Content: "what next?"}); err != nil {
		t.Fatal(err)
	}
	bot := conv.Actor{AgentID: "bot"}
	before := st.reads.Load()
	const deltas = 50
	for range deltas {
		if _, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r1", Delta: "more "}); err != nil {
			t.Fatal(err)
		}
	}
	// Closing the runners waits for every dispatch they started.
	detach()
	b.runners.Close()
	if n := st.reads.Load() - before; n != 0 {
		t.Errorf("%d event reads while %d deltas streamed past a waiting prompt; want none", n, deltas)
	}
	select {
	case f := <-frames:
		t.Fatalf("a prompt was pushed while the runner's message held the floor: %s", f)
	default:
	}

	// Runners again, on the same engine: the prompt goes once the message ends.
	rn := runners.New(b.eng, st, runners.Options{})
	t.Cleanup(rn.Close)
	defer rn.Attach(id, "bot", func(f []byte) { frames <- f })()
	if _, err := b.eng.FinalizeMessage(b.ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r1", Reason: parley.FinishEndTurn}); err != nil {
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
