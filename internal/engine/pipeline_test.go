package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// holdingStore holds its next append, once armed, until released, and
// then writes it, or with fail set fails it without writing anything (a
// disk that failed).
type holdingStore struct {
	store.Store
	fail    bool
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newHoldingStore(t *testing.T, fail bool) *holdingStore {
	return &holdingStore{Store: openStore(t), fail: fail, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *holdingStore) Append(ctx context.Context, p store.AppendParams) error {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
		if g.fail {
			return errors.New("disk I/O error")
		}
	}
	return g.Store.Append(ctx, p)
}

// AppendAsync is Append, on a goroutine of its own.
func (g *holdingStore) AppendAsync(p store.AppendParams, done func(error)) {
	go func() { done(g.Append(context.Background(), p)) }()
}

// TestFailedAppendFailsItsFollowers: a runner's deltas queued while the
// append before them is being written fail with it when it fails, none is
// published, and the engine's state, the log and the subscribers stay in
// step: the next delta is written right after what was durable.
func TestFailedAppendFailsItsFollowers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := newHoldingStore(t, true)
	eng := engine.New(g, engine.Options{})
	defer eng.Close()
	id, bot, sub := streamingWatched(ctx, t, eng)
	defer sub.Close()
	before := sub.Init.Position.Seq

	g.armed.Store(true)
	waits := []*engine.Ack{eng.StreamTextAsync(ctx, id, conv.StreamText{Actor: bot, MessageID: "m", Delta: "one "})}
	<-g.entered // the first delta's append is being written; the next ones queue behind it
	for _, d := range []string{"two ", "three ", "four "} {
		waits = append(waits, eng.StreamTextAsync(ctx, id, conv.StreamText{Actor: bot, MessageID: "m", Delta: d}))
	}
	close(g.release)
	for i, wait := range waits {
		if r, err := wait.Wait(); err == nil {
			t.Fatalf("delta %d was acknowledged at seq %d after the append before it failed", i, r.Seq)
		}
	}
	h, err := g.Head(ctx, id)
	head := h.Seq
	if err != nil {
		t.Fatal(err)
	}
	if v, err := eng.Conversation(ctx, id); err != nil || v.Head.LastSeq != head || head != before {
		t.Fatalf("head %+v (%v), the log's %d, before the deltas %d", v, err, head, before)
	}
	if m, err := reads.New(g, eng).Message(ctx, id, "m"); err != nil || len(m.Parts) != 0 {
		t.Fatalf("the message after the failed deltas: %+v, %v", m, err)
	}
	r, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: "m", Delta: "five"})
	if err != nil || r.Seq != head+1 {
		t.Fatalf("the next delta: %+v, %v; want seq %d", r, err, head+1)
	}
	for it := range sub.C {
		if it.Event == nil {
			continue
		}
		var ch parley.Chunk
		_ = json.Unmarshal(it.Event.Data, &ch)
		if it.Event.Seq != head+1 || ch.Content != "five" {
			t.Fatalf("the subscriber got seq %d %s %q; want the next delta only, at seq %d", it.Event.Seq, it.Event.Type, ch.Content, head+1)
		}
		break
	}
}

// deltasBehindAHeldAppend queues deltas to the streaming message m of a
// new conversation of agent bot while the append before them (a delta to
// another message) is being written, so that they are decided together
// once it is; it returns the engine, the store, the conversation and the
// deltas' Acks.
func deltasBehindAHeldAppend(t *testing.T, ctx context.Context, opts engine.Options, deltas ...string) (*engine.Engine, *holdingStore, string, []*engine.Ack) {
	t.Helper()
	g := newHoldingStore(t, false)
	eng := engine.New(g, opts)
	t.Cleanup(eng.Close)
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"bot"}})
	if err != nil {
		t.Fatal(err)
	}
	id, bot := v.Conversation.ID, conv.Actor{AgentID: "bot"}
	for _, m := range []string{"m", "hold"} {
		if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: m, Role: parley.RoleAssistant, Streaming: true}); err != nil {
			t.Fatal(err)
		}
	}
	g.armed.Store(true)
	first := eng.StreamTextAsync(ctx, id, conv.StreamText{Actor: bot, MessageID: "hold", Delta: "x"})
	<-g.entered
	var waits []*engine.Ack
	for _, d := range deltas {
		waits = append(waits, eng.StreamTextAsync(ctx, id, conv.StreamText{Actor: bot, MessageID: "m", Delta: d}))
	}
	close(g.release)
	if _, err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	return eng, g, id, waits
}

// TestQueuedDeltasAreWrittenTogether: deltas that come while their
// conversation's append is being written are written as one chunk event,
// their text joined in order, and each is acknowledged with its seq.
func TestQueuedDeltasAreWrittenTogether(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, g, id, waits := deltasBehindAHeldAppend(t, ctx, engine.Options{}, "0", "1", "2", "3", "4")
	var seqs []int64
	for _, wait := range waits {
		r, err := wait.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if r.Message != nil {
			t.Fatalf("a queued delta's outcome holds its message (%q): every frame in flight would keep a message alive", r.Message.Content)
		}
		seqs = append(seqs, r.Seq)
	}
	for _, s := range seqs[1:] {
		if s != seqs[0] {
			t.Fatalf("the queued deltas were acknowledged at seqs %v, want one", seqs)
		}
	}
	evs, err := g.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, After: seqs[0] - 1, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ch parley.Chunk
	if len(evs) != 1 || evs[0].Type != parley.EventChunk || json.Unmarshal(evs[0].Data, &ch) != nil || ch.Content != "01234" || ch.MessageID != "m" {
		t.Fatalf("the log after the held append: %+v", evs)
	}
	// A delta whose caller waits for it is answered with the message.
	r, err := eng.StreamText(ctx, id, conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "m", Delta: "5"})
	if err != nil || r.Message == nil || r.Message.Content != "012345" {
		t.Fatalf("StreamText's outcome: %+v, %v; want the message with its text so far", r, err)
	}
}

// TestJoinedDeltasOverTheLimitAreSplit: queued deltas whose joined text
// would make the message too large are decided one by one, so that each
// delta that fits is written and only the one past the limit is refused.
func TestJoinedDeltasOverTheLimitAreSplit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limits := conv.DefaultLimits
	limits.MaxTextBytes = 10
	eng, _, id, waits := deltasBehindAHeldAppend(t, ctx, engine.Options{Limits: limits}, "aaaa", "bbbb", "cccc")
	for i, wait := range waits {
		r, err := wait.Wait()
		if i < 2 && (err != nil || r.Seq == 0) {
			t.Fatalf("delta %d: %+v, %v; want it written", i, r, err)
		}
		if i == 2 && parley.ErrorCode(err) != parley.ETOOLARGE {
			t.Fatalf("delta %d: %+v, %v; want it refused as too large", i, r, err)
		}
	}
	m, err := eng.StreamText(ctx, id, conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "m", Delta: "dd"})
	if err != nil || m.Message == nil || m.Message.Content != "aaaabbbbdd" {
		t.Fatalf("the message after the split: %+v, %v; want aaaabbbbdd", m, err)
	}
}

// TestSnapshotEverySoOften: streamed deltas do not rewrite the stored
// state snapshot each time; a new engine on the store (a restart), and the
// list of conversations, fold the events after it and agree with the log.
func TestSnapshotEverySoOften(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree, "bot")
	bot := conv.Actor{AgentID: "bot"}
	if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: "m", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	rec, err := b.db.GetConversation(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	stored := string(rec.State)
	for i := range 10 {
		if _, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "m", Delta: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if rec, err = b.db.GetConversation(b.ctx, id); err != nil || string(rec.State) != stored || rec.LastSeq != 12 {
		t.Fatalf("after 10 deltas the store holds seq %d and a snapshot rewritten: %v (%v)", rec.LastSeq, string(rec.State) != stored, err)
	}
	next := engine.New(b.db, engine.Options{})
	defer next.Close()
	v, err := next.Conversation(b.ctx, id)
	if err != nil || v.Head.LastSeq != 12 {
		t.Fatalf("a new engine's head: %+v, %v", v, err)
	}
	if m, err := reads.New(b.db, next).Message(b.ctx, id, "m"); err != nil || textOf(m) != "0123456789" {
		t.Fatalf("a new engine's message: %v, %v", m, err)
	}
	views, _, err := next.ListConversations(b.ctx, store.ListConversationsParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Conversation.ID == id && v.Head.LastSeq != 12 {
			t.Fatalf("the list's head: %+v", v.Head)
		}
	}
	// A message ends: the snapshot is rewritten.
	if _, err := b.eng.FinalizeMessage(b.ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "m", Reason: parley.FinishEndTurn}); err != nil {
		t.Fatal(err)
	}
	if rec, err = b.db.GetConversation(b.ctx, id); err != nil || string(rec.State) == stored {
		t.Fatalf("the finalize left the snapshot (%v)", err)
	}
}
