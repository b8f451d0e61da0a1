package feed_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/feed"
)

// appendSized appends n events of size bytes of data each to the log.
func (l *memLog) appendSized(n, size int) []parley.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []parley.Event
	for range n {
		ev := parley.Event{Seq: int64(len(l.events) + 1), Type: "trace", Data: make([]byte, size)}
		l.events = append(l.events, ev)
		out = append(out, ev)
	}
	return out
}

// counter counts as a feed.Counter.
type counter struct{ n int }

func (c *counter) Inc() { c.n++ }

// follow starts a follower of conversation id of h, joined at the log's
// current end (as a stream with no position is, after its snapshot).
func follow(t *testing.T, h *feed.Hub, l *memLog, id string) *feed.Follower {
	t.Helper()
	f, err := h.FollowFrom(func(func()) (int64, bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return int64(len(l.events)), true, nil
	}, id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// drain takes every item waiting for f, and returns their seqs (guidance: 0).
func drain(t *testing.T, f *feed.Follower) ([]int64, error) {
	t.Helper()
	var seqs []int64
	for {
		it, err := f.Next(context.Background(), 0)
		if errors.Is(err, feed.ErrIdle) {
			return seqs, nil
		}
		if err != nil {
			return seqs, err
		}
		var seq int64
		if it.Event != nil {
			seq = it.Event.Seq
		}
		seqs = append(seqs, seq)
	}
}

// TestHeldCountsWhatIsUnreadOnce: an event published to several
// subscribers counts once (its data, its JSON, its fields) while any of
// them has not taken it, and not at all once they all have; what a
// follower reads from the log, and what its reader says it holds, count
// for it alone; a follower that ends lets go of everything it held.
func TestHeldCountsWhatIsUnreadOnce(t *testing.T) {
	l := &memLog{}
	h := feed.New(l, feed.Options{})
	fs := []*feed.Follower{follow(t, h, l, "c"), follow(t, h, l, "c"), follow(t, h, l, "c")}
	h.Publish("c", l.appendSized(1, 1000), &parley.Guidance{NextAgentID: "bob", AfterSeq: 1})
	const one = 2*1000 + 256 + 256 // the event's data twice (its JSON) and fields, the guidance
	if got := h.Held(); got != one {
		t.Fatalf("one event and a guidance published to 3 followers: held %d, want %d", got, one)
	}
	for i, f := range fs {
		if seqs, err := drain(t, f); err != nil || len(seqs) != 2 {
			t.Fatalf("follower %d took %v, %v", i, seqs, err)
		}
		want := int64(one)
		if i == len(fs)-1 {
			want = 0
		}
		if got := h.Held(); got != want {
			t.Fatalf("%d of 3 followers took them: held %d, want %d", i+1, got, want)
		}
	}

	// A follower that reads the log holds its pages until it hands them
	// out; one whose reader holds its first frame holds that.
	from0, err := h.Follow(func() (int64, error) { return 0, nil }, "c")
	if err != nil {
		t.Fatal(err)
	}
	if !from0.Holding(5000) {
		t.Fatal("a follower alone could not hold 5000 bytes")
	}
	if got := h.Held(); got != 5000 {
		t.Fatalf("a reader holding 5000 bytes: held %d", got)
	}
	from0.Holding(0)
	it, err := from0.Next(context.Background(), 0) // reads the log (1 event), hands it out
	if err != nil || it.Event == nil || it.Event.Seq != 1 || h.Held() != 0 {
		t.Fatalf("the log's event: %+v, %v, held %d", it, err, h.Held())
	}
	h.Publish("c", l.appendSized(2, 100), nil)
	from0.Holding(700)
	for _, f := range append(fs, from0) {
		f.Close()
	}
	if got := h.Held(); got != 0 {
		t.Fatalf("every follower closed with events queued and bytes held: held %d, want 0", got)
	}
}

// TestShedsThoseUnreadLongestFirst: past the hub's MemoryBytes, the
// follower that has taken nothing for longest is ended with ErrShed (and
// counted), not the one whose events made it pass; the next goes only when
// that is not enough; a follower that takes what it is sent as it comes
// is never shed, and gets every event.
func TestShedsThoseUnreadLongestFirst(t *testing.T) {
	l := &memLog{}
	var shed, slow counter
	const budget = 100_000
	h := feed.New(l, feed.Options{MemoryBytes: budget, Shed: &shed, SlowDisconnects: &slow})
	old := follow(t, h, l, "a")
	h.Publish("a", l.appendSized(1, 10_000), nil) // old holds about 20 KB, unread
	newer := follow(t, h, l, "b")
	reader := follow(t, h, l, "b")
	var got []int64
	read := func() {
		seqs, err := drain(t, reader)
		if err != nil {
			t.Fatalf("the reader: %v", err)
		}
		got = append(got, seqs...)
	}
	for range 3 {
		h.Publish("b", l.appendSized(1, 10_000), nil)
		read()
	}
	if held := h.Held(); held > budget || shed.n != 0 {
		t.Fatalf("under the budget: held %d, %d shed", held, shed.n)
	}
	h.Publish("b", l.appendSized(1, 10_000), nil) // 5 events unread: over it
	read()
	if _, err := drain(t, old); !errors.Is(err, feed.ErrShed) {
		t.Fatalf("the follower unread longest: %v, want ErrShed", err)
	}
	select {
	case <-newer.Done():
		t.Fatal("the follower whose events passed the budget was shed, not the one unread longer")
	default:
	}
	if held := h.Held(); held > budget || shed.n != 1 || slow.n != 1 {
		t.Fatalf("after shedding the oldest: held %d (budget %d), %d shed, %d slow", held, budget, shed.n, slow.n)
	}
	h.Publish("b", l.appendSized(1, 10_000), nil) // newer alone passes it: then newer goes
	read()
	if _, err := drain(t, newer); !errors.Is(err, feed.ErrShed) {
		t.Fatalf("the follower that took nothing: %v, want ErrShed", err)
	}
	if held := h.Held(); held > budget || shed.n != 2 {
		t.Fatalf("after shedding both: held %d, %d shed", held, shed.n)
	}
	h.Publish("b", l.appendSized(1, 10_000), nil)
	read()
	if fmt.Sprint(got) != "[2 3 4 5 6 7]" { // the log after a's event 1
		t.Fatalf("the reader got %v, want every event of b", got)
	}
	reader.Close()
	if got := h.Held(); got != 0 {
		t.Fatalf("all ended: held %d", got)
	}
}

// TestHoldingMakesRoom: a follower whose reader begins to hold a large
// frame has older unread followers shed to make room; when none can, it is
// refused (Holding reports false), and for a frame over the whole budget
// no other is shed for it.
func TestHoldingMakesRoom(t *testing.T) {
	l := &memLog{}
	const budget = 100_000
	h := feed.New(l, feed.Options{MemoryBytes: budget})
	old := follow(t, h, l, "a")
	h.Publish("a", l.appendSized(1, 30_000), nil)
	reader := follow(t, h, l, "a")
	if _, err := drain(t, reader); err != nil {
		t.Fatal(err)
	}
	joining := follow(t, h, l, "b")
	if !joining.Holding(60_000) {
		t.Fatal("a new follower was refused while an older one that reads nothing could make room")
	}
	if _, err := drain(t, old); !errors.Is(err, feed.ErrShed) {
		t.Fatalf("the older follower that reads nothing: %v, want ErrShed", err)
	}
	big := follow(t, h, l, "b")
	if big.Holding(budget + 1) {
		t.Fatal("a follower holding more than the budget alone was let in")
	}
	if _, err := big.Next(context.Background(), 0); !errors.Is(err, feed.ErrShed) {
		t.Fatalf("the refused follower: %v, want ErrShed", err)
	}
	select {
	case <-joining.Done():
		t.Fatal("a follower was shed for one that could never fit")
	default:
	}
	if _, err := drain(t, reader); err != nil {
		t.Fatalf("the reader, which holds nothing: %v", err)
	}
	for _, f := range []*feed.Follower{old, reader, joining, big} {
		f.Close()
	}
	if got := h.Held(); got != 0 {
		t.Fatalf("all ended: held %d", got)
	}
}

// TestASubscriptionsChannelCounts: what waits in a Subscription's channel
// counts as held for it until its reader says it took it.
func TestASubscriptionsChannelCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := &memLog{}
	h := feed.New(l, feed.Options{})
	sub, err := h.SubscribeFrom(ctx, "c", func(func()) (int64, bool, error) { return 0, true, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	h.Publish("c", l.appendSized(1, 1000), nil)
	it := <-sub.C
	if held := h.Held(); held != 1000+256 {
		t.Fatalf("an event in the channel, not taken yet: held %d, want %d", held, 1000+256)
	}
	sub.Took(it)
	if held := h.Held(); held != 0 {
		t.Fatalf("the event taken: held %d", held)
	}
}
