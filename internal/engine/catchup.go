package engine

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tick"
)

// Several nodes may write into one store (PostgreSQL). A node's cached
// state of a conversation is then current only until another node writes,
// so the engine brings it up to the log's head (catchUp) whenever it may
// be stale: when another node says it wrote (CatchUp), when an append
// met a newer head (ECONFLICT), and before it refuses a command, so that
// a refusal is decided on state as fresh as an acceptance is. What it
// folds in, it publishes to this node's subscribers and runners as if it
// had written it. A conversation another node deleted, or deleted and
// made again under the same id (a head of another epoch), is gone: the
// node drops it, ending its subscribers and runners here as a delete on
// this node does, and never folds one conversation's log into another's.

// beyondHead is a seq past any log's head: CatchUp with it looks at the
// head whatever the cached state's seq (a conversation may be gone, or
// notifications may have been missed).
const beyondHead = 1 << 62

// catchUp folds into a cached conversation the events after its state
// that are in the log, and publishes them. It reports whether the state
// moved. If the conversation is gone from the store (see above), it drops
// it and returns the not_found error its subscribers got. c.mu must be
// held and c loaded.
func (e *Engine) catchUp(ctx context.Context, c *conversation, id string) (bool, error) {
	h, err := e.store.Head(ctx, id)
	if parley.ErrorCode(err) == parley.ENOTFOUND || err == nil && h.Epoch != c.state.Conversation.Epoch {
		return true, e.drop(c, id)
	}
	head := h.Seq
	if err != nil || head <= c.state.LastSeq {
		return false, err
	}
	for c.state.LastSeq < head {
		events, err := e.store.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, After: c.state.LastSeq, Limit: feed.HistoryPage, MaxBytes: feed.HistoryPageBytes})
		if err != nil {
			return true, err
		}
		if len(events) == 0 {
			return true, parley.Errorf(parley.EINTERNAL, "conversation %s: the log ends at seq %d but its head says %d", id, c.state.LastSeq, head)
		}
		prev := c.state
		c.state = conv.Evolve(c.state, events...)
		for _, m := range c.streams {
			for _, ev := range events {
				ApplyStreamEvent(m, ev)
			}
			if _, ok := c.state.Streams.Get(m.ID); !ok {
				delete(c.streams, m.ID) // finalized or reverted meanwhile
			}
		}
		e.endReaders(id, &prev, events, c.state)
		e.reindex(id, c, events)
		e.publish(c, id, events)
		// A prompt another node queued may be for a runner here, and a
		// stream another node's runner began must end if that node dies.
		e.runners.Changed(Change{ConversationID: id, State: c.state, Events: events, Loaded: true})
	}
	e.schedule(c, id)
	return true, nil
}

// HandleNotice is what a node does with a notice of another node's append (the
// feed.Broker's callback): a conversation it follows catches up
// (CatchUp); one it does not follow, whose prompt queue changed, is
// loaded when this node has agent-wide runners, which may be the ones to
// answer it (the load tells them, Runners.Changed). A notice of a delete
// has a cached conversation look at its head, which finds it gone (or
// made again already, which is gone too) and drops it.
func (e *Engine) HandleNotice(n feed.Notice) {
	if n.Deleted {
		e.CatchUp(n.ConversationID, beyondHead)
		return
	}
	if e.cache.get(n.ConversationID) != nil || !n.Queue || !e.runners.AgentWide() {
		e.CatchUp(n.ConversationID, n.Seq)
		return
	}
	if !e.track() {
		return
	}
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := e.lockLoaded(ctx, n.ConversationID); err == nil {
			c.mu.Unlock()
		}
	}()
}

// CatchUp tells the engine that another node wrote a conversation up to
// seq. If this node follows that conversation (it has it cached: a
// subscriber, a runner or a recent command), it catches up: its
// subscribers get the new events, its runners their aborts and prompts.
// It returns at once; the catching up runs on its own.
func (e *Engine) CatchUp(conversationID string, seq int64) {
	m := e.cache
	e.mu.Lock() // e.mu before m.mu, never the other way round
	m.mu.Lock()
	c := m.convs[conversationID]
	if c == nil || e.closed {
		m.mu.Unlock()
		e.mu.Unlock()
		return
	}
	c.wanted = max(c.wanted, seq)
	if c.catching { // the catch-up under way takes this one too
		m.mu.Unlock()
		e.mu.Unlock()
		return
	}
	c.catching = true
	m.mu.Unlock()
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		for {
			m.mu.Lock()
			want := c.wanted
			if want == 0 {
				c.catching = false
				m.mu.Unlock()
				return
			}
			c.wanted = 0
			m.mu.Unlock()
			e.catchUpTo(c, conversationID, want)
		}
	}()
}

// catchUpTo catches a followed conversation up if its state is before seq.
func (e *Engine) catchUpTo(c *conversation, id string, seq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded || c.state.LastSeq >= seq {
		return // not followed, or this node wrote it (or caught up) already
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.catchUp(ctx, c, id); err != nil {
		// What was folded was published, so the state stays good, only
		// behind: KeepCaughtUp finds it behind and tries again.
		e.opts.Logger.Warn("catching up with other nodes' writes failed", slog.String("conversation", id), slog.Any("err", err))
	}
}

// KeepCaughtUp looks, every period until ctx ends, at the log's head of
// each conversation this node follows (with subscribers or runners here)
// and catches up those it is behind on: a safety net under the broker's
// notifications, so that one lost, or a catch-up that failed, costs at
// most a period of latency, never an event a subscriber waits for. It
// returns at once unless other nodes write (Options.Shared).
func (e *Engine) KeepCaughtUp(ctx context.Context, period time.Duration) {
	if !e.opts.Shared {
		return
	}
	tick.Every(ctx, period, func() {
		behind, err := e.cache.behind(ctx, e.store)
		if err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("reading the heads of followed conversations failed", slog.Any("err", err))
		}
		for id, seq := range behind {
			e.CatchUp(id, seq)
		}
	})
}

// behind returns the followed conversations whose log has moved past
// their cached state, with the log's head; and those gone from the store
// (deleted, or made again: another epoch), with beyondHead, which has
// them look at their head and drop. One being written now is skipped:
// its writer meets the head anyway.
func (m *cache) behind(ctx context.Context, st store.Store) (map[string]int64, error) {
	followed := m.entries(m.followed)
	cached := make(map[string]store.Head, len(followed))
	for id, c := range followed {
		if c.mu.TryLock() {
			if c.loaded {
				cached[id] = headOf(c.state)
			}
			c.mu.Unlock()
		}
	}
	out := map[string]int64{}
	for ids := range slices.Chunk(slices.Collect(maps.Keys(cached)), store.MaxHeads) {
		heads, err := st.Heads(ctx, ids)
		if err != nil {
			return out, err
		}
		for _, id := range ids {
			switch h, ok := heads[id]; {
			case !ok || h.Epoch != cached[id].Epoch:
				out[id] = beyondHead
			case h.Seq > cached[id].Seq:
				out[id] = h.Seq
			}
		}
	}
	return out, nil
}

// headOf is the store's Head of a conversation in state s.
func headOf(s conv.State) store.Head {
	return store.Head{Seq: s.LastSeq, Epoch: s.Conversation.Epoch}
}

// CatchUpAll brings every cached conversation up to the log's head: what
// a node does when it may have missed notifications (its listening
// connection to the store was lost and is back).
func (e *Engine) CatchUpAll(ctx context.Context) {
	for id := range e.cache.entries(nil) {
		if ctx.Err() != nil {
			return
		}
		e.CatchUp(id, beyondHead) // each catches up to the head it reads
	}
}
