package feed

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// HistoryPage is how many events one history read returns, and
// HistoryPageBytes about how many bytes of events: a page of large events
// is cut short, so that a subscriber catching up holds little at a time.
const (
	HistoryPage      = 500
	HistoryPageBytes = 1 << 20
)

// ErrIdle is what Follower.Next returns when nothing came within the wait
// it was given: the subscription lives on.
var ErrIdle = errors.New("nothing to send yet")

// Follower is a live stream of one conversation that its reader pulls
// from (Next), with no goroutine of its own: every event after the seq its
// join returned exactly once, in seq order, with guidance between them.
// The log's history after that seq is read from the store, page by page,
// and merged with the live events by seq. One goroutine at a time may
// call its methods, but Close and Holding.
type Follower struct {
	h       *Hub
	s       *sub
	next    int64 // the seq of the next event to hand out
	history bool  // whether the log is still being read up to the live events
	err     error // what ended it
}

// Follow starts following a conversation. It registers the follower at
// once, so that everything published from then on is queued for it, and
// then calls join, which returns the seq the stream continues after (join
// runs under whatever lock makes that seq agree with what is published).
// If join fails, so does Follow. Call Close when done.
func (h *Hub) Follow(join func() (after int64, err error), conversationID string) (*Follower, error) {
	return h.FollowFrom(func(func()) (int64, bool, error) {
		after, err := join()
		return after, false, err
	}, conversationID)
}

// A Join starts a follower of a conversation: it returns the seq the
// stream continues after, and whether that is the log's last (current:
// then nothing is read from the log until a live event skips ahead of
// what was sent). It calls joined once that seq is fixed, holding what
// orders it with what is published and with End; until then an End does
// not end the follower but empties its queue (the conversation is being
// deleted and maybe made again: the join starts it on what it finds). A
// join that never calls joined is joined when it returns.
type Join func(joined func()) (after int64, current bool, err error)

// FollowFrom is Follow for a Join.
func (h *Hub) FollowFrom(join Join, conversationID string) (*Follower, error) {
	s := h.add(conversationID)
	after, current, err := join(s.join)
	if err != nil {
		h.remove(s)
		s.fail(err)
		return nil, err
	}
	s.join()
	return &Follower{h: h, s: s, next: after + 1, history: !current}, nil
}

// Notify has kick called whenever something may be ready for Next: items
// were queued for the follower, or it was ended. So a reader need not wait
// in Next: it calls Next with no wait until ErrIdle, and again when kicked.
// kick must return at once (it is called under the follower's lock, from
// the goroutine that publishes); nil stops the calls.
func (f *Follower) Notify(kick func()) {
	f.s.mu.Lock()
	f.s.kick = kick
	f.s.mu.Unlock()
}

// Done returns a channel that is closed once the follower has ended: its
// reader closed it, or the hub ended it (it was too slow or shed, its
// conversation was deleted, the server shuts down).
func (f *Follower) Done() <-chan struct{} { return f.s.dead }

// Holding tells the hub that the follower's reader holds n bytes made for
// it that its client has not taken yet (its first frame, being written):
// they count against the hub's MemoryBytes as what it queues does, until
// Holding(0). To make room for them the hub may shed followers that have
// taken nothing for longer; if none can make room, the follower is ended
// (ErrShed) and Holding reports false. It reports false too once the
// follower has ended.
func (f *Follower) Holding(n int) bool {
	s := f.s
	s.mu.Lock()
	d := int64(n) - s.hold
	s.mu.Unlock()
	if d > 0 && !f.h.reserve(d) {
		s.fail(ErrShed) // refused: the others read more recently
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	switch {
	case d > 0 && s.bytes == 0 && s.own == 0:
		s.since = f.h.tick.Add(1) // it begins to hold: after every follower before it
	case d < 0:
		s.since = f.h.tick.Load() // what it held went out
	}
	s.hold += d
	s.ownLocked(d)
	return true
}

// Close ends the follower; Next then returns context.Canceled.
func (f *Follower) Close() {
	f.s.fail(context.Canceled)
	f.h.remove(f.s)
}

// Next returns the next item, waiting up to wait for one (0: not at all;
// less than 0: as long as it takes). It returns ErrIdle when none came in
// time, ctx's error when ctx ends, and the error that ended the stream
// (ErrSlow, ErrShed, a shutdown) otherwise; after any error but ErrIdle
// the stream is over and Close has been called.
func (f *Follower) Next(ctx context.Context, wait time.Duration) (Item, error) {
	if f.err != nil {
		return Item{}, f.err
	}
	it, err := f.next1(ctx, wait)
	if err != nil && !errors.Is(err, ErrIdle) {
		f.err = err
		f.Close()
	}
	return it, err
}

func (f *Follower) next1(ctx context.Context, wait time.Duration) (Item, error) {
	var timeout <-chan time.Time
	for {
		it, live, ok, err := f.s.pop(!f.history)
		if err != nil {
			return Item{}, err
		}
		if ok && live {
			if ok, err = f.merge(ctx, &it); err != nil {
				return Item{}, err
			}
			if !ok {
				continue // skipped, or put behind the log's events before it
			}
		}
		if ok {
			f.h.release1(it) // handed out: no longer held for it
			f.h.opts.Delivered.Inc()
			return it, nil
		}
		if f.history {
			n, err := f.read(ctx, f.next, 0)
			if err != nil {
				return Item{}, err
			}
			f.history = n == HistoryPage // a short page is the end of the log
			continue
		}
		if wait == 0 {
			return Item{}, ErrIdle
		}
		if wait > 0 && timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-f.s.notify:
		case <-f.s.dead:
		case <-timeout:
			return Item{}, ErrIdle
		case <-ctx.Done():
			return Item{}, ctx.Err()
		}
	}
}

// merge puts a live item the follower took in line after what was handed
// out: it reports whether the item is the next to hand out. An event
// already sent from the log is skipped, and the events a live one skips
// ahead of (a gap) are read from the log, the live one put behind them.
func (f *Follower) merge(ctx context.Context, it *Item) (bool, error) {
	if ev := it.Event; ev != nil {
		if ev.Seq < f.next {
			f.h.release1(*it)
			return false, nil // already sent from history
		}
		if ev.Seq > f.next { // a gap: read it from the log
			for f.next < ev.Seq {
				n, err := f.read(ctx, f.next, ev.Seq-1)
				if err == nil && n == 0 {
					err = parley.Errorf(parley.EINTERNAL, "the log has no events %d to %d of conversation %s", f.next, ev.Seq-1, f.s.conversationID)
				}
				if err != nil {
					f.h.release1(*it)
					return false, err
				}
			}
			f.next = ev.Seq + 1
			return false, f.s.putReady(*it)
		}
		f.next = ev.Seq + 1
	} else if it.Guidance.AfterSeq < f.next-1 {
		// Newer events were sent already (from the log, while this waited).
		// It is still the newest guidance change this subscriber has: any
		// change after it follows in the queue. It holds after the events
		// sent, so it is sent as of them (dropping it would leave the
		// subscriber on an older one until the next change, which may
		// never come).
		g := *it.Guidance
		g.AfterSeq = f.next - 1
		it.Guidance = &g
	}
	return true, nil
}

// read reads a page of the log from seq next on (up to upTo, if upTo > 0)
// into the items to hand out, and returns how many events it read.
func (f *Follower) read(ctx context.Context, next, upTo int64) (int, error) {
	limit := HistoryPage
	if upTo > 0 && upTo-next+1 < int64(limit) {
		limit = int(upTo - next + 1)
	}
	events, err := f.h.log.ReadEvents(ctx, store.ReadEventsParams{ConversationID: f.s.conversationID, After: next - 1, Limit: limit, MaxBytes: HistoryPageBytes})
	if err != nil {
		return 0, err
	}
	items := make([]Item, len(events))
	size := 0
	for i := range events {
		items[i] = Item{Event: &events[i]}
		size += len(events[i].Data)
	}
	if len(events) > 0 {
		if err := f.s.putReady(items...); err != nil {
			return 0, err
		}
		f.next = events[len(events)-1].Seq + 1
	}
	if len(events) < limit && upTo == 0 && size >= HistoryPageBytes {
		return HistoryPage, nil // a page cut short by its bytes: read on
	}
	return len(events), nil
}

// Subscription is a live stream of one conversation delivered on a
// channel: C yields what a Follower's Next would, and is closed when the
// subscription ends; Err then says why. A goroutine of its own moves the
// items, at most about handoffBytes waiting in C at a time; they count as
// held for the subscription (see Hub.Held) until the reader says it took
// them (Took), or the subscription ends.
type Subscription struct {
	C      <-chan Item
	f      *Follower
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Err returns why the subscription ended (ErrSlow, a context error, or a
// shutdown error). It is valid after C is closed.
func (sub *Subscription) Err() error {
	<-sub.done
	return sub.err
}

// Close ends the subscription.
func (sub *Subscription) Close() { sub.cancel() }

// Took tells the hub that the reader took it from C: it no longer counts
// as held for the subscription.
func (sub *Subscription) Took(it Item) { sub.f.s.lend(-int64(itemBytes(it))) }

// handoffItems and handoffBytes bound what waits between a subscription's
// pump and its reader: many small events, so that the reader takes them
// in one batch, but few large ones.
const (
	handoffItems = 64
	handoffBytes = 1 << 20
)

// Subscribe is Follow with the items delivered on a channel until ctx
// ends or Close is called.
func (h *Hub) Subscribe(ctx context.Context, conversationID string, join func() (after int64, err error)) (*Subscription, error) {
	return h.SubscribeFrom(ctx, conversationID, func(func()) (int64, bool, error) {
		after, err := join()
		return after, false, err
	})
}

// SubscribeFrom is FollowFrom with the items delivered on a channel until
// ctx ends or Close is called.
func (h *Hub) SubscribeFrom(ctx context.Context, conversationID string, join Join) (*Subscription, error) {
	f, err := h.FollowFrom(join, conversationID)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	out := &handoff{out: make(chan Item, handoffItems)}
	sub := &Subscription{C: out.out, f: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer func() {
			f.Close()
			close(out.out)
			close(sub.done)
			cancel()
		}()
		for {
			it, err := f.Next(pctx, -1)
			if err == nil {
				f.s.lend(int64(itemBytes(it))) // until the reader took it
				err = out.send(pctx, f.s, it)
			}
			if err != nil {
				sub.err = err
				return
			}
		}
	}()
	return sub, nil
}

// handoff is the channel from a subscription's pump to its reader,
// bounded in items (its capacity) and in bytes: an item waits while the
// items the reader has not taken yet would, with it, pass handoffBytes (an
// item larger than that goes alone). So a reader that stops reading holds
// at most about handoffBytes here, whatever the events weigh.
type handoff struct {
	out   chan Item
	sizes [handoffItems]int // the sizes of the items sent, the last ones at sent-1, sent-2, …
	sent  int
}

// send hands one item to the reader; it gives up when the subscription
// fails (a full queue while the reader is stuck) or ends.
func (h *handoff) send(ctx context.Context, s *sub, it Item) error {
	n := itemBytes(it)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		waiting := len(h.out)
		if waiting == 0 || h.pending(waiting)+n <= handoffBytes {
			break
		}
		t := time.NewTimer(wait) // the reader takes large items slowly: look again soon
		select {
		case <-t.C:
		case <-s.dead:
			t.Stop()
			return s.failure()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	select {
	case h.out <- it:
		h.sizes[h.sent%handoffItems] = n
		h.sent++
		return nil
	case <-s.dead:
		return s.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pending is what the last k items sent weigh.
func (h *handoff) pending(k int) int {
	total := 0
	for j := h.sent - k; j < h.sent; j++ {
		total += h.sizes[j%handoffItems]
	}
	return total
}
