package feed

import (
	"context"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// Subscription is a live stream of one conversation. C yields every event
// after the seq its join returned exactly once, in seq order, with guidance
// between them, and is closed when the subscription ends; Err then says why.
type Subscription struct {
	C      <-chan Item
	s      *sub
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

// HistoryPage is how many events one history read returns, and
// HistoryPageBytes about how many bytes of events: a page of large events
// is cut short, so that a subscriber catching up holds little at a time.
const (
	HistoryPage      = 500
	HistoryPageBytes = 1 << 20
)

// handoffItems and handoffBytes bound what waits between a subscription's
// pump and its reader (the transport's writer): many small events, so that
// the writer writes them in one batch, but few large ones.
const (
	handoffItems = 64
	handoffBytes = 1 << 20
)

// Subscribe starts a subscription of a conversation. It registers the
// subscriber at once, so that everything published from then on is queued
// for it, and then calls join, which returns the seq the stream continues
// after (join runs under whatever lock makes that seq agree with what is
// published). The subscription then sends the log's events after that
// seq, read from the store, and the live ones, merged by seq: no gap and
// no duplicate. If join fails, so does Subscribe.
func (h *Hub) Subscribe(ctx context.Context, conversationID string, join func() (after int64, err error)) (*Subscription, error) {
	s := h.add(conversationID)
	after, err := join()
	if err != nil {
		h.remove(s)
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-ctx.Done():
		case <-pctx.Done():
		}
		cancel()
	}()
	out := &handoff{out: make(chan Item, handoffItems)}
	sub := &Subscription{C: out.out, s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		sub.err = h.pump(pctx, s, after+1, out)
		h.remove(s)
		close(out.out)
		close(sub.done)
		cancel()
	}()
	return sub, nil
}

// pump sends history from seq next on, then live items, to out.
func (h *Hub) pump(ctx context.Context, s *sub, next int64, out *handoff) error {
	var err error
	if next, err = h.history(ctx, s, next, 0, out); err != nil {
		return err
	}
	for {
		items, err := s.take(ctx)
		if err != nil {
			return err
		}
		for _, it := range items {
			if ev := it.Event; ev != nil {
				if ev.Seq < next {
					s.handed(it)
					continue // already sent from history
				}
				if ev.Seq > next { // a gap: read it from the log
					filled, err := h.history(ctx, s, next, ev.Seq-1, out)
					if err != nil {
						return err
					}
					if filled != ev.Seq {
						return parley.Errorf(parley.EINTERNAL, "the log has no events %d to %d of conversation %s", filled, ev.Seq-1, s.conversationID)
					}
				}
				next = ev.Seq + 1
			} else if it.Guidance.AfterSeq < next-1 {
				// Newer events were sent already (from the log, while this
				// waited). It is still the newest guidance change this
				// subscriber has: any change after it follows in the queue.
				// It holds after the events sent, so it is sent as of them
				// (dropping it would leave the subscriber on an older one
				// until the next change, which may never come).
				g := *it.Guidance
				g.AfterSeq = next - 1
				it = Item{Guidance: &g}
			}
			if err := out.send(ctx, s, it); err != nil {
				return err
			}
			s.handed(it)
			h.opts.Delivered.Inc()
		}
	}
}

// history sends events with seq >= next (and <= upTo, if upTo > 0) from the
// store and returns the seq after the last one sent.
func (h *Hub) history(ctx context.Context, s *sub, next, upTo int64, out *handoff) (int64, error) {
	for {
		limit := HistoryPage
		if upTo > 0 && upTo-next+1 < int64(limit) {
			limit = int(upTo - next + 1)
		}
		if limit <= 0 {
			return next, nil
		}
		events, err := h.log.ReadEvents(ctx, store.ReadEventsParams{ConversationID: s.conversationID, After: next - 1, Limit: limit, MaxBytes: HistoryPageBytes})
		if err != nil {
			return next, err
		}
		size := 0
		for i := range events {
			ev := events[i]
			events[i] = parley.Event{} // the reader holds its own copy: the page keeps nothing it sent
			size += len(ev.Data)
			if err := out.send(ctx, s, Item{Event: &ev}); err != nil {
				return next, err
			}
			next = ev.Seq + 1
		}
		if len(events) < limit && size < HistoryPageBytes {
			return next, nil // the end of the log, not a page cut short
		}
	}
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
