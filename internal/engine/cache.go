package engine

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// The cache of conversations: each entry holds one conversation's state,
// loaded from the store on first use and kept current by the writes made
// here and, with other nodes writing, by catching up with theirs (see
// catchup.go). An entry leaves the cache when it is evicted (idle and
// followed by nobody here) or dropped (its conversation is gone from the
// store: see drop); whoever held it then looks the id up again.

// cache holds the conversations this node has loaded, by id, and indexes
// them by the agents that take part in them (conv.Members, which a
// conversation.updated event may change), so that what concerns one agent's conversations
// (an agent-wide runner of it came or went) looks at those alone, not at
// every conversation cached. Its lock, mu, also guards each entry's
// wanted, catching and indexed.
type cache struct {
	mu      sync.Mutex
	convs   map[string]*conversation
	members map[string]map[string]struct{}
	// max bounds the entries (Options.MaxCached); followed says whether
	// this node follows a conversation (a subscriber or a runner here), so
	// that its entry is never the one evicted.
	max      int
	followed func(id string) bool
}

func newCache(max int, followed func(id string) bool) *cache {
	return &cache{convs: make(map[string]*conversation), members: make(map[string]map[string]struct{}), max: max, followed: followed}
}

// entry returns the cache entry of a conversation, creating an unloaded one.
func (e *Engine) entry(id string) *conversation {
	m := e.cache
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[id]
	if !ok {
		if len(m.convs) >= m.max {
			m.evictOne()
		}
		c = &conversation{}
		m.convs[id] = c
	}
	return c
}

// evictOne drops one idle cached conversation that this node does not
// follow (no subscriber, no runner here: those must hear what other nodes
// write, which only a cached conversation does). Dropping a conversation
// that is still in use is safe: its writer's append would meet ECONFLICT
// and reload. m.mu must be held.
func (m *cache) evictOne() {
	for id, c := range m.convs {
		if m.followed(id) || c.busy() {
			continue
		}
		if c.mu.TryLock() {
			c.stopTimers()
			c.loaded = false // whoever still holds it looks the id up again
			m.uncacheLocked(id, c)
			c.mu.Unlock()
			return
		}
	}
}

// index lists a conversation whose state c now holds under the agents
// that take part in it (cache.members), and lists it again when they
// changed (a conversation.updated event). c.mu must be held, so that c is
// not dropped meanwhile.
func (m *cache) index(id string, c *conversation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	agents := conv.Members(c.state.Conversation)
	if c.indexed != nil && slices.Equal(c.indexed, agents) || m.convs[id] != c {
		return
	}
	for _, agent := range c.indexed {
		delete(m.members[agent], id)
		if len(m.members[agent]) == 0 {
			delete(m.members, agent)
		}
	}
	c.indexed = agents
	for _, agent := range c.indexed {
		ids := m.members[agent]
		if ids == nil {
			ids = make(map[string]struct{})
			m.members[agent] = ids
		}
		ids[id] = struct{}{}
	}
}

// uncache takes c, the entry of conversation id, out of the cache and of
// the index of members, unless it left already.
func (m *cache) uncache(id string, c *conversation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.uncacheLocked(id, c)
}

// uncacheLocked is uncache with m.mu held.
func (m *cache) uncacheLocked(id string, c *conversation) {
	if m.convs[id] != c {
		return
	}
	delete(m.convs, id)
	for _, agent := range c.indexed {
		delete(m.members[agent], id)
		if len(m.members[agent]) == 0 {
			delete(m.members, agent)
		}
	}
	c.indexed = nil
}

// get returns the cache entry of conversation id, or nil.
func (m *cache) get(id string) *conversation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.convs[id]
}

// entries returns the cache's entries, by conversation id, of those keep
// returns true for (all if keep is nil).
func (m *cache) entries(keep func(id string) bool) map[string]*conversation {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]*conversation, len(m.convs))
	for id, c := range m.convs {
		if keep == nil || keep(id) {
			out[id] = c
		}
	}
	return out
}

// of returns the ids of the cached conversations the agents take part in,
// each once, sorted.
func (m *cache) of(agents ...string) []string {
	m.mu.Lock()
	var ids []string
	for _, agent := range agents {
		for id := range m.members[agent] {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	slices.Sort(ids)
	return slices.Compact(ids)
}

// cached reports whether c is the cache's entry of conversation id.
func (m *cache) cached(id string, c *conversation) bool {
	return m.get(id) == c
}

// withLoaded calls fn with conversation id's cache entry, locked, if it
// is loaded; it loads nothing.
func (m *cache) withLoaded(id string, fn func(c *conversation)) {
	c := m.get(id)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded { // (and so still the cache's entry: see drop)
		fn(c)
	}
}

// lockLoaded locks a conversation's entry and loads its state if needed;
// with a shared store it brings a cached state up to the log's head, and
// loads the conversation afresh if the cached one is gone (deleted, or
// made again under its id on another node). It returns ENOTFOUND for an
// unknown conversation.
func (e *Engine) lockLoaded(ctx context.Context, id string) (*conversation, error) {
	for {
		if e.isClosed() {
			return nil, errClosed
		}
		c := e.entry(id)
		c.mu.Lock()
		if !e.cache.cached(id, c) {
			c.mu.Unlock() // dropped or evicted while this waited for it
			continue
		}
		if !c.loaded {
			if err := e.load(ctx, c, id); err != nil {
				return nil, err
			}
			return c, nil
		}
		if e.opts.Shared {
			// Other nodes write too: what this node answers from its
			// cached state (a view, a snapshot, a runner's state, who may
			// read, a refusal) is answered on the log's head, whichever
			// node is asked, and of the conversation the store holds now.
			// One look at the head; the events after the cache are read
			// only if there are any.
			if _, err := e.catchUp(ctx, c, id); err != nil {
				dropped := c.dropped
				c.mu.Unlock()
				if dropped {
					continue // gone from the store: look again at what it holds now
				}
				// What was folded was published: the state stays good, only
				// behind. Catch up in the background, for the subscribers.
				e.CatchUp(id, beyondHead)
				return nil, err
			}
		}
		return c, nil
	}
}

// load reads the state of conversation id into its locked entry c. On
// error it unlocks c, and takes the entry of an unknown conversation out
// of the cache.
func (e *Engine) load(ctx context.Context, c *conversation, id string) error {
	if err := e.reload(ctx, c, id); err != nil {
		c.mu.Unlock()
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			e.cache.uncache(id, c)
		}
		return err
	}
	c.leaseFromNow(e.opts.Now())
	e.schedule(c, id) // a claim or a turn read from the store lapses on time too
	// Its runners learn of its streams, whose runner may be gone, and of
	// its queue, whose prompts may wait for a runner here.
	e.runners.Changed(Change{ConversationID: id, State: c.state, Loaded: true})
	if c.guided == nil {
		c.guided = e.guidance(id, c.state) // what every subscriber has seen
	}
	return nil
}

// reload reads a conversation's state from the store and hands the feed
// the events after the last one it published (when the state was loaded
// before), so that no subscriber waits for them. A conversation loaded
// before that the store no longer holds, or holds with another epoch, is
// dropped (ENOTFOUND): its subscribers must not get another's events.
// c.mu must be held.
func (e *Engine) reload(ctx context.Context, c *conversation, id string) error {
	rec, err := e.store.GetConversation(ctx, id)
	if c.published != 0 && (parley.ErrorCode(err) == parley.ENOTFOUND || err == nil && rec.Conversation.Epoch != c.state.Conversation.Epoch) {
		return e.drop(c, id)
	}
	if err != nil {
		return err
	}
	s, err := stateOf(rec)
	if err != nil {
		return err
	}
	c.snapshot = s.LastSeq
	// The snapshot lags the log (it is not rewritten by every streamed
	// delta, and an older version's may lag too): fold the rest.
	if s, err = foldTail(ctx, e.store, s, rec.LastSeq); err != nil {
		return err
	}
	if s.LastSeq < rec.LastSeq {
		return parley.Errorf(parley.EINTERNAL, "conversation %s: the log ends at seq %d but its head says %d", id, s.LastSeq, rec.LastSeq)
	}
	var prev *conv.State // the state the events after c.published fold from, if known
	if c.loaded && c.state.LastSeq == c.published {
		old := c.state
		prev = &old
	}
	c.state, c.loaded, c.streams = s, true, nil // assemblies are rebuilt on demand
	e.cache.index(id, c)
	if c.published == 0 {
		c.published = s.LastSeq // the first load: subscribers read the log up to here
		return nil
	}
	for c.published < s.LastSeq {
		events, err := e.store.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, After: c.published, Limit: feed.HistoryPage, MaxBytes: feed.HistoryPageBytes})
		if err != nil || len(events) == 0 {
			// The feed reads what it missed at the next event; until then
			// the background catch-up (KeepCaughtUp) looks again.
			return nil
		}
		if prev != nil && e.conns.watched(id) {
			next := conv.Evolve(*prev, events...) // the state after this page
			e.endReaders(id, prev, events, next)
			prev = &next
		} else {
			e.endReaders(id, nil, events, c.state)
			prev = nil
		}
		e.publish(c, id, events)
		e.runners.Changed(Change{ConversationID: id, State: c.state, Events: events, Loaded: true})
	}
	return nil
}

// resync rereads a conversation after a write whose outcome is unknown: the
// store failed without a verdict (a lost connection to PostgreSQL, say),
// and the write may have committed. What did commit is published, so that
// the head, the log and the subscribers agree again. If the store cannot
// be read now, the next command reloads. c.mu must be held.
func (e *Engine) resync(c *conversation, id string) {
	if c.dropped {
		return // gone from the store: nothing of it to make agree
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.reload(ctx, c, id); err != nil {
		// The state is what it was before the write: a later command meets
		// the log's head (ECONFLICT) and catches up, publishing.
		e.opts.Logger.Warn("rereading a conversation after a failed write failed", slog.String("conversation", id), slog.Any("err", err))
	}
}
