package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// TestRefusalOnStaleStateIsChecked: two engines share one store (as two
// nodes share PostgreSQL) and hear nothing of each other. Engine B caches
// the conversation while alice holds the turn; A sees her end it and bob
// take the next. B, asked by alice to claim the turn after bob's, would
// refuse on its cached state (alice's turn still open); it checks the
// log's head first, catches up, and decides on the current state. A
// subscriber on B gets what A wrote, once the catch-up folds it in.
func TestRefusalOnStaleStateIsChecked(t *testing.T) {
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree, "alice", "bob")
	b.say(t, id, "alice", "opening", parley.FinalityNone) // turn 1, alice's, open
	other := engine.New(b.db, engine.Options{})
	defer other.Close()
	sub, err := other.Subscribe(b.ctx, id, &parley.Position{Seq: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	b.say(t, id, "alice", "done", parley.FinalityTurn) // on A: turn 1 ends
	b.say(t, id, "bob", "mine", parley.FinalityTurn)   // turn 2, bob's, ends
	// On B, whose cache still has turn 1 open: alice claims turn 3.
	r, err := other.Claim(b.ctx, id, conv.ClaimTurn{Actor: conv.Actor{AgentID: "alice"}, TTL: time.Minute})
	if err != nil {
		t.Fatalf("a claim decided on stale state: %v", err)
	}
	if r.Turn != 3 {
		t.Fatalf("claimed turn %d, want 3", r.Turn)
	}
	head, err := b.db.Head(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for next := int64(1); next <= head.Seq; {
		it, ok := <-sub.C
		if !ok {
			t.Fatalf("B's subscription ended at seq %d of %d: %v", next, head.Seq, sub.Err())
		}
		if it.Event == nil {
			continue
		}
		if it.Event.Seq != next {
			t.Fatalf("B's subscriber got seq %d, want %d", it.Event.Seq, next)
		}
		next++
	}
}

// overtaken is a store on which another node always gets there first: each
// append is preceded by one from elsewhere, so that it finds the log moved
// on. Its Exclusive is the store's own.
type overtaken struct {
	store.Store
	elsewhere func()
}

func (o overtaken) Append(ctx context.Context, p store.AppendParams) error {
	o.elsewhere()
	return o.Store.Append(ctx, p)
}

// AppendAsync is Append, on a goroutine of its own.
func (o overtaken) AppendAsync(p store.AppendParams, done func(error)) {
	go func() { done(o.Append(context.Background(), p)) }()
}

// TestOvertakenWriterStillWrites: node B's writes into a conversation that
// node A writes without pause (a runner streaming at full speed there) are
// overtaken at every optimistic attempt. After two, B decides holding the
// conversation's lock in the store, which no writer can overtake: its
// message is written, once, on the log's head, and not refused as busy.
func TestOvertakenWriterStillWrites(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	id := a.conversation(t, parley.PolicyFree, "alice", "bob")
	n := 0
	elsewhere := func() {
		n++
		a.say(t, id, "alice", fmt.Sprintf("streaming %d", n), parley.FinalityTurn)
	}
	b := engine.New(overtaken{Store: a.db, elsewhere: elsewhere}, engine.Options{Shared: true})
	defer b.Close()
	for i := range 3 {
		r, err := b.PostMessage(a.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "bob"}, Role: parley.RoleAssistant, Parts: text(fmt.Sprint("bob ", i)), Finality: parley.FinalityTurn})
		if err != nil {
			t.Fatalf("bob's message %d, written on node B: %v", i, err)
		}
		head, err := a.db.Head(a.ctx, id)
		if err != nil || r.Message.Seq != head.Seq {
			t.Fatalf("bob's message %d at seq %d, the log's head is %d (%v)", i, r.Message.Seq, head.Seq, err)
		}
	}
	bobs := 0
	for _, e := range a.events(t, id) {
		if e.AgentID == "bob" {
			bobs++
		}
	}
	if bobs != 3 || n < 6 {
		t.Fatalf("%d of bob's messages written, %d of alice's in between; want 3 and at least 6", bobs, n)
	}
}

// nextEvent returns the next event a subscription yields, failing the test
// after wait.
func nextEvent(t *testing.T, sub *engine.Subscription, wait time.Duration) parley.Event {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case it, ok := <-sub.C:
			if !ok {
				t.Fatalf("the subscription ended: %v", sub.Err())
			}
			if it.Event != nil {
				return *it.Event
			}
		case <-timeout:
			t.Fatalf("no event within %s", wait)
		}
	}
}

// TestFailedCatchUpStillPublishes: node B follows a conversation that node
// A writes; B hears of none of A's writes. A request on B whose client is
// gone (its context canceled) fails while B catches up: the write A made
// still reaches B's subscriber, though nothing is written after it (B
// catches up in the background). Before, the failed catch-up left the
// conversation unloaded, and B published nothing until the next write.
func TestFailedCatchUpStillPublishes(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	id := a.conversation(t, parley.PolicyFree, "alice", "bob")
	b := engine.New(a.db, engine.Options{Shared: true})
	defer b.Close()
	v, err := b.Conversation(a.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(a.ctx, id, &parley.Position{Seq: v.Head.LastSeq})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seq := a.say(t, id, "alice", "the last word", parley.FinalityTurn).Seq
	gone, cancel := context.WithCancel(a.ctx)
	cancel()
	if _, err := b.Conversation(gone, id); err == nil {
		t.Fatal("a request with a canceled context was answered")
	}
	if ev := nextEvent(t, sub, 5*time.Second); ev.Seq != seq {
		t.Fatalf("B's subscriber got seq %d, want %d", ev.Seq, seq)
	}
}

// TestLostNotificationCostsOnlyLatency: node B follows a conversation
// (a subscriber) and never hears of A's writes (every notification lost).
// KeepCaughtUp looks at the heads of what B follows and catches up: the
// subscriber gets A's last write without any write after it.
func TestLostNotificationCostsOnlyLatency(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	id := a.conversation(t, parley.PolicyFree, "alice", "bob")
	b := engine.New(a.db, engine.Options{Shared: true})
	defer b.Close()
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	go b.KeepCaughtUp(ctx, 20*time.Millisecond)
	sub, err := b.Subscribe(a.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seq := a.say(t, id, "alice", "unannounced", parley.FinalityTurn).Seq
	if ev := nextEvent(t, sub, 5*time.Second); ev.Seq != seq {
		t.Fatalf("B's subscriber got seq %d, want %d", ev.Seq, seq)
	}
}

// TestFollowedConversationsStayCached: node B caches at most one
// conversation. One it follows (a subscriber) is not evicted when B loads
// another, so that it still hears what other nodes write.
func TestFollowedConversationsStayCached(t *testing.T) {
	a := setup(t, engine.Options{Shared: true})
	followed := a.conversation(t, parley.PolicyFree, "alice", "bob")
	other := a.conversation(t, parley.PolicyFree, "alice", "bob")
	b := engine.New(a.db, engine.Options{Shared: true, MaxCached: 1})
	defer b.Close()
	sub, err := b.Subscribe(a.ctx, followed, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := b.Conversation(a.ctx, other); err != nil {
		t.Fatal(err)
	}
	seq := a.say(t, followed, "alice", "still heard", parley.FinalityTurn).Seq
	b.CatchUp(followed, seq)
	if ev := nextEvent(t, sub, 5*time.Second); ev.Seq != seq {
		t.Fatalf("B's subscriber got seq %d, want %d", ev.Seq, seq)
	}
}

// staleHead is a store whose next Head, once armed, answers an older
// seq: as if another node wrote right after this one looked.
type staleHead struct {
	store.Store
	head *atomic.Int64 // > 0: the seq of the next Head
}

func (s staleHead) Head(ctx context.Context, id string) (store.Head, error) {
	h, err := s.Store.Head(ctx, id)
	if seq := s.head.Swap(0); seq > 0 && err == nil {
		h.Seq = seq
	}
	return h, err
}

// TestSnapshotIsAsOfItsPosition: node A streams a message and rewrites its
// row (a checkpoint) just after node B looked at the log's head. B's
// snapshot for a subscriber that joins then must not show that row's text
// past the snapshot's position (its chunks follow live), and B's assembly
// of the message must not take the row's text twice: B reads again as of
// the newer head.
func TestSnapshotIsAsOfItsPosition(t *testing.T) {
	limits := conv.DefaultLimits
	limits.CheckpointChunks = 2 // the row is rewritten every other delta
	a := setup(t, engine.Options{Shared: true, Limits: limits})
	id := a.conversation(t, parley.PolicyFree, "alice", "bob")
	alice := conv.Actor{AgentID: "alice"}
	if _, err := a.eng.PostMessage(a.ctx, id, conv.PostMessage{Actor: alice, ID: "m", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	stream := func(delta string) {
		if _, err := a.eng.StreamText(a.ctx, id, conv.StreamText{Actor: alice, MessageID: "m", Delta: delta}); err != nil {
			t.Fatal(err)
		}
	}
	stream("one ")
	head := new(atomic.Int64)
	b := engine.New(staleHead{Store: a.db, head: head}, engine.Options{Shared: true, Limits: limits})
	defer b.Close()
	v, err := b.Conversation(a.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cached := v.Head.LastSeq
	stream("two ")
	if _, err := a.eng.StreamTool(a.ctx, id, conv.StreamTool{Actor: alice, MessageID: "m", Tool: conv.ToolUpdate{CallID: "c", ToolName: "search", Status: "running"}}); err != nil {
		t.Fatal(err)
	}
	stream("three")
	head.Store(cached) // B's next look at the head misses A's writes
	sub, err := b.Subscribe(a.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var want string
	for _, ev := range a.events(t, id) {
		var ch parley.Chunk
		if ev.Seq <= sub.Init.Position.Seq && ev.Type == parley.EventChunk && json.Unmarshal(ev.Data, &ch) == nil {
			want += ch.Content
		}
	}
	var got string
	for _, m := range sub.Init.Messages {
		if m.ID == "m" {
			got = textOf(m)
		}
	}
	if got != want {
		t.Fatalf("B's snapshot at seq %d shows %q; the log up to it has %q", sub.Init.Position.Seq, got, want)
	}
	m, err := reads.New(a.db, b).Message(a.ctx, id, "m")
	if err != nil || textOf(m) != "one two three" {
		t.Fatalf("B assembles %q (%v), want %q", textOf(m), err, "one two three")
	}
}

// textOf is the text of a message's text parts.
func textOf(m *parley.Message) string {
	var s string
	for _, p := range m.Parts {
		if p.Type == parley.PartText {
			s += p.Text
		}
	}
	return s
}

// expiringAtOnce is the store of one of two nodes whose claim timers fire
// together: an append that writes claim.expired waits until the other
// node's has come too, so that both decide on the claim before either
// writes.
type expiringAtOnce struct {
	store.Store
	arrive *sync.WaitGroup
	t      *testing.T
}

func (s expiringAtOnce) Append(ctx context.Context, p store.AppendParams) error {
	for _, ev := range p.Events {
		if ev.Type == parley.EventClaimExpired {
			s.arrive.Done()
			waitGroup(s.t, s.arrive, "the other node's claim expiry")
			break
		}
	}
	return s.Store.Append(ctx, p)
}

// waitGroup waits for wg, failing the test after 30 s.
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s never came", what)
	}
}

// TestClaimExpiryWrittenOnce: two nodes share one store and cache a
// conversation whose claim has lapsed; both arm the claim's expiry, whose
// timers fire at once, and both decide to write claim.expired before
// either has. The log holds it once: the second node's append meets the
// first's, catches up, and finds no claim left to expire.
func TestClaimExpiryWrittenOnce(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	b := setup(t, engine.Options{Now: clk.Now, Shared: true})
	id := b.conversation(t, parley.PolicyFree, "alice", "bob")
	if _, err := b.eng.Claim(b.ctx, id, conv.ClaimTurn{Actor: conv.Actor{AgentID: "alice"}, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Minute) // the claim has lapsed; b's own timer waits a real minute
	var arrive sync.WaitGroup
	arrive.Add(2)
	var nodes []*engine.Engine
	for range 2 {
		node := engine.New(expiringAtOnce{Store: b.db, arrive: &arrive, t: t}, engine.Options{Now: clk.Now, Shared: true})
		defer node.Close()
		nodes = append(nodes, node)
		if _, err := node.Conversation(b.ctx, id); err != nil { // loading arms the expiry, due at once
			t.Fatal(err)
		}
	}
	waitGroup(t, &arrive, "both nodes' claim expiry")
	for _, node := range nodes {
		node.Close() // once its expiry, retries included, is done
	}
	expired := 0
	for _, ev := range b.events(t, id) {
		if ev.Type == parley.EventClaimExpired {
			expired++
		}
	}
	if expired != 1 {
		t.Fatalf("claim.expired written %d times, want once", expired)
	}
}
