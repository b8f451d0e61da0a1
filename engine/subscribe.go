package engine

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// Init is what a subscriber learns first. Recovered is true when the stream
// continues exactly after the position the subscriber gave; otherwise it gets
// a snapshot (the latest messages) and the stream continues after Position.
type Init struct {
	Recovered    bool                `json:"recovered"`
	Position     parley.Position     `json:"position"`
	Conversation parley.Conversation `json:"conversation"`
	Head         parley.Head         `json:"head"`
	Guidance     *parley.Guidance    `json:"guidance"`
	Messages     []*parley.Message   `json:"messages,omitempty"`
}

// Subscription is a live stream of one conversation. C yields every event
// after Init.Position exactly once, in seq order, with guidance between them,
// and is closed when the subscription ends; Err then says why.
type Subscription struct {
	Init   Init
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

// historyPage is how many events one history read returns.
const historyPage = 500

// Subscribe starts a stream of a conversation. With from set and in the
// current epoch (or with no epoch), the stream resumes right after from.Seq; otherwise Init
// carries a snapshot. Live events are queued from before the history is read,
// and history and live events are merged by seq, so there is no gap and no
// duplicate. It returns ENOTFOUND for an unknown conversation.
func (e *Engine) Subscribe(ctx context.Context, conversationID string, from *parley.Position) (*Subscription, error) {
	s := e.hub.add(conversationID, e.opts.SubscriberBuffer)
	c, err := e.lockLoaded(ctx, conversationID) // EUNAVAILABLE once the engine is closed
	if err != nil {
		e.hub.remove(s)
		return nil, err
	}
	state := c.state
	c.mu.Unlock()

	now := e.opts.Now()
	init := Init{Conversation: state.Conversation, Head: state.Head(now), Guidance: state.Guidance(now)}
	epoch := state.Conversation.Epoch
	if from != nil && (from.Epoch == epoch || from.Epoch == "") && from.Seq >= 0 && from.Seq <= state.LastSeq {
		init.Recovered = true
		init.Position = parley.Position{Seq: from.Seq, Epoch: epoch}
	} else {
		init.Position = parley.Position{Seq: state.LastSeq, Epoch: epoch}
		msgs, err := e.latestMessages(ctx, conversationID, state.LastSeq)
		if err != nil {
			e.hub.remove(s)
			return nil, err
		}
		init.Messages = msgs
	}
	pctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-ctx.Done():
		case <-pctx.Done():
		}
		cancel()
	}()
	out := make(chan Item, 64)
	sub := &Subscription{Init: init, C: out, s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		sub.err = e.pump(pctx, s, init.Position.Seq+1, out)
		e.hub.remove(s)
		close(out)
		close(sub.done)
		cancel()
	}()
	return sub, nil
}

// latestMessages returns up to SnapshotMessages of the newest messages with
// seq <= upTo, oldest first.
func (e *Engine) latestMessages(ctx context.Context, id string, upTo int64) ([]*parley.Message, error) {
	n := e.opts.SnapshotMessages
	ms, err := e.store.ListMessages(ctx, store.ListMessagesParams{ConversationID: id, Limit: n, Latest: true})
	if err != nil {
		return nil, err
	}
	kept := ms[:0]
	for _, m := range ms {
		if m.Seq <= upTo {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

// pump sends history from seq next on, then live items, to out.
func (e *Engine) pump(ctx context.Context, s *sub, next int64, out chan<- Item) error {
	var err error
	if next, err = e.history(ctx, s, next, 0, out); err != nil {
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
					continue // already sent from history
				}
				if ev.Seq > next { // a gap: read it from the log
					filled, err := e.history(ctx, s, next, ev.Seq-1, out)
					if err != nil {
						return err
					}
					if filled != ev.Seq {
						return parley.Errorf(parley.EINTERNAL, "the log has no events %d to %d of conversation %s", filled, ev.Seq-1, s.conversationID)
					}
				}
				next = ev.Seq + 1
			} else if it.Guidance.AfterSeq < next-1 {
				continue // stale: newer events were sent already
			}
			if err := send(ctx, s, out, it); err != nil {
				return err
			}
			e.opts.Metrics.Delivered.Inc()
		}
	}
}

// history sends events with seq >= next (and <= upTo, if upTo > 0) from the
// store and returns the seq after the last one sent.
func (e *Engine) history(ctx context.Context, s *sub, next, upTo int64, out chan<- Item) (int64, error) {
	for {
		limit := historyPage
		if upTo > 0 && upTo-next+1 < int64(limit) {
			limit = int(upTo - next + 1)
		}
		if limit <= 0 {
			return next, nil
		}
		events, err := e.store.ReadEvents(ctx, store.ReadEventsParams{ConversationID: s.conversationID, After: next - 1, Limit: limit})
		if err != nil {
			return next, err
		}
		for i := range events {
			if err := send(ctx, s, out, Item{Event: &events[i]}); err != nil {
				return next, err
			}
			next = events[i].Seq + 1
		}
		if len(events) < limit {
			return next, nil
		}
	}
}

// send hands one item to the reader; it gives up when the subscription
// fails (a full queue while the reader is stuck) or ends.
func send(ctx context.Context, s *sub, out chan<- Item, it Item) error {
	select {
	case out <- it:
		return nil
	case <-s.dead:
		return s.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}
