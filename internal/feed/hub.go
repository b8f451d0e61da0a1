// Package feed holds the live subscribers of each conversation: what the
// engine publishes after every append is queued for each of them, bounded
// in items and bytes, without ever blocking the writer; each subscription
// sends the log's history after its position and then the live events,
// merged by seq, so that a subscriber gets every event once, in order. A
// Broker tells a node of what other nodes appended (one node: nothing).
package feed

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Item is one thing a subscriber receives after its Init: an event of the log
// or a new guidance (exactly one of the two is set).
type Item struct {
	Event    *parley.Event
	Guidance *parley.Guidance
	// shared is what the subscribers an item was published to share: its
	// JSON and how many of them hold it still. It is nil for an event a
	// follower read from the log, which is its own.
	shared *shared
}

// shared is what the subscribers an item was published to share: its
// JSON, made by the first reader that asks, and how many of them hold it
// still (queued, or taken and not handed out yet). Its size counts in the
// hub's Held while one does.
type shared struct {
	once sync.Once
	json []byte
	size int64
	refs atomic.Int32
}

// JSON returns the item's event as JSON (Event.AppendJSON), made once for
// every subscriber the event was published to. Callers must not change it.
func (it Item) JSON() []byte {
	if it.Event == nil {
		return nil
	}
	sh := it.shared
	if sh == nil {
		return it.Event.AppendJSON(nil)
	}
	sh.once.Do(func() { sh.json = it.Event.AppendJSON(make([]byte, 0, 160+len(it.Event.Data))) })
	return sh.json
}

// ErrSlow ends a subscription whose reader fell too far behind. The reader can
// resume from its last position.
var ErrSlow = parley.Errorf(parley.EBUSY, "subscriber too slow: its buffer filled up; resume from the last position")

// ErrShed ends a subscription that the hub dropped to stay within
// Options.MemoryBytes: of the subscribers holding bytes they had not
// taken, it was one of those that had taken nothing for longest. The
// reader can resume from its last position.
var ErrShed = parley.Errorf(parley.EBUSY, "subscriber dropped: the server holds as much as it may for streams that are not read, and this one had read nothing for longest; resume from the last position")

// Reader reads the log: the store, for the events a subscriber missed.
type Reader interface {
	ReadEvents(ctx context.Context, p store.ReadEventsParams) ([]parley.Event, error)
}

// Counter and Gauge are what the hub counts with (Prometheus's counters
// and gauges are both).
type (
	Counter interface{ Inc() }
	Gauge   interface {
		Inc()
		Dec()
	}
)

// Options configure a Hub. Zero values take the defaults.
type Options struct {
	// Buffer bounds the live items queued for one subscriber while it
	// catches up or reads slowly; past it the subscriber is ended with
	// ErrSlow (default 4096).
	Buffer int
	// BufferBytes bounds the same queue in bytes (default 16 MiB); a
	// subscriber that holds nothing takes any one batch, however large.
	BufferBytes int
	// MemoryBytes bounds what the hub holds for all its subscribers that
	// they have not taken (see Hub.Held; default 256 MiB): past it, the
	// subscribers that have taken nothing for longest (and, of those, the
	// ones holding most) are ended with ErrShed until it holds no more.
	MemoryBytes int64
	// Subscribers counts the live subscriptions, SlowDisconnects those
	// ended for reading too slowly (a full queue, or shed), Shed those
	// ended to stay within MemoryBytes, Delivered the items handed to
	// readers (each may be nil).
	Subscribers     Gauge
	SlowDisconnects Counter
	Shed            Counter
	Delivered       Counter
}

type nop struct{}

func (nop) Inc() {}
func (nop) Dec() {}

// Hub holds the live subscribers of each conversation and hands them what
// is published, without ever blocking the publisher. It is safe for
// concurrent use.
type Hub struct {
	log  Reader
	opts Options
	mu   sync.RWMutex
	subs map[string]map[*sub]struct{}
	// held is what the hub holds for its subscribers that they have not
	// taken (see Held); tick is its clock, which publishes and joins move
	// on, and shedding is held by the one goroutine that sheds (see
	// budget.go).
	held     atomic.Int64
	tick     atomic.Int64
	shedding sync.Mutex
}

// New returns a Hub whose subscriptions read what they missed from log.
func New(log Reader, o Options) *Hub {
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 16 << 20
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = 256 << 20
	}
	if o.Subscribers == nil {
		o.Subscribers = nop{}
	}
	if o.SlowDisconnects == nil {
		o.SlowDisconnects = nop{}
	}
	if o.Shed == nil {
		o.Shed = nop{}
	}
	if o.Delivered == nil {
		o.Delivered = nop{}
	}
	return &Hub{log: log, opts: o, subs: make(map[string]map[*sub]struct{})}
}

// sub is one subscriber: the live items queued for it, bounded in items
// and in bytes, and what its follower took and has not handed out yet.
// What it holds that its reader has not taken counts in the hub's held:
// its live items once each, however many subscribers share them (see
// shared), and what is its own in full (own).
type sub struct {
	h              *Hub
	conversationID string
	limit          int
	maxBytes       int
	notify         chan struct{}
	dead           chan struct{} // closed when err is set

	mu sync.Mutex
	// queue holds the live items published for it that its follower has
	// not taken; ready the items its follower took and hands out next:
	// events read from the log, and a live item that waits behind them.
	queue []Item
	ready []Item
	// bytes is what its live items weigh (itemBytes, each in full: the
	// bound of its queue); own is what it holds alone: events read from
	// the log for it, and what its reader holds for it (hold, see
	// Follower.Holding).
	bytes int
	own   int64
	hold  int64
	// since is the hub's tick when it last handed something out, or began
	// to hold something (see budget.go).
	since int64
	err   error
	// kick, if set, is called (with mu held) whenever items are queued or
	// err is set (see Follower.Notify).
	kick func()
	// joined is set once its join has fixed where it starts (see Join):
	// from then on End ends it.
	joined bool
}

// itemBytes is about what an item holds in memory: an event's data and
// its fields, or a guidance. A subscriber's queue is bounded by it.
func itemBytes(it Item) int {
	if it.Event != nil {
		return len(it.Event.Data) + 256
	}
	return 256
}

// sharedBytes is what an item published to subscribers weighs while they
// hold it: its itemBytes, and its JSON, made once for them all.
func sharedBytes(it Item) int64 {
	if it.Event != nil {
		return int64(itemBytes(it) + len(it.Event.Data))
	}
	return int64(itemBytes(it))
}

func (h *Hub) add(conversationID string) *sub {
	s := &sub{h: h, conversationID: conversationID, limit: h.opts.Buffer, maxBytes: h.opts.BufferBytes, notify: make(chan struct{}, 1), dead: make(chan struct{})}
	h.mu.Lock()
	m := h.subs[conversationID]
	if m == nil {
		m = make(map[*sub]struct{})
		h.subs[conversationID] = m
	}
	m[s] = struct{}{}
	h.mu.Unlock()
	h.opts.Subscribers.Inc()
	return s
}

func (h *Hub) remove(s *sub) {
	h.mu.Lock()
	if m := h.subs[s.conversationID]; m != nil {
		if _, ok := m[s]; ok {
			delete(m, s)
			h.opts.Subscribers.Dec()
		}
		if len(m) == 0 {
			delete(h.subs, s.conversationID)
		}
	}
	h.mu.Unlock()
}

// Publish queues events (in seq order) and then the guidance, if not nil,
// for every subscriber of the conversation. A subscriber whose queue would
// overflow is ended with ErrSlow; should the hub hold more than its
// MemoryBytes with them, subscribers are shed first (see budget.go).
// Publish never blocks on a reader.
func (h *Hub) Publish(conversationID string, events []parley.Event, g *parley.Guidance) {
	items := make([]Item, 0, len(events)+1)
	shares := make([]shared, len(events)+1)
	var size int64
	add := func(it Item) {
		it.shared = &shares[len(items)]
		it.shared.size = sharedBytes(it)
		size += it.shared.size
		items = append(items, it)
	}
	for i := range events {
		add(Item{Event: &events[i]})
	}
	if g != nil {
		add(Item{Guidance: g})
	}
	if h.held.Load()+size > h.opts.MemoryBytes && h.Follows(conversationID) {
		h.reserve(size) // shed others first; these are published whatever it finds
	}
	h.mu.RLock()
	if subs := h.subs[conversationID]; len(subs) > 0 {
		for _, it := range items {
			it.shared.refs.Store(int32(len(subs)))
		}
		h.held.Add(size)
		at := h.tick.Add(1)
		for s := range subs {
			if !s.push(items, at) {
				h.opts.SlowDisconnects.Inc()
			}
		}
	}
	h.mu.RUnlock()
}

// End ends every subscription of a conversation that has joined with
// err: the conversation was deleted. One still joining is not ended: it
// loses what was queued for it, and goes on to start on whatever its join
// finds (nothing, or a conversation made again under the same id, which
// is then all it gets). End must be called holding what a join holds
// when it calls joined (see Join), so that each subscription is either
// ended or starts after End.
func (h *Hub) End(conversationID string, err error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs[conversationID] {
		s.end(err)
	}
}

// end ends s with err if it has joined, and empties its queue if not.
func (s *sub) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
	case s.joined:
		s.dropLocked(err)
	default:
		s.h.release(s.queue)
		s.queue, s.bytes = nil, 0
	}
}

// join marks s joined (see End).
func (s *sub) join() {
	s.mu.Lock()
	s.joined = true
	s.mu.Unlock()
}

// EndAll ends every subscription with err (the server shuts down).
func (h *Hub) EndAll(err error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, m := range h.subs {
		for s := range m {
			s.fail(err)
		}
	}
}

// push appends items, published at the hub's tick at; it reports false
// if that overflowed the queue: more items than its limit, or more bytes
// than its maxBytes while it still holds some (a subscriber that holds
// nothing takes any one batch, so that a large event never drops a
// reader that keeps up). The items it does not keep are released.
func (s *sub) push(items []Item, at int64) bool {
	size := 0
	for _, it := range items {
		size += itemBytes(it)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		s.h.release(items)
		return true
	}
	if len(s.queue)+len(items) > s.limit || (s.bytes > 0 && s.bytes+size > s.maxBytes) {
		s.h.release(items)
		s.dropLocked(ErrSlow)
		return false
	}
	if s.bytes == 0 && s.own == 0 {
		s.since = at // it begins to hold what it has not taken
	}
	s.queue = append(s.queue, items...)
	s.bytes += size
	s.wake()
	s.kicked()
	return true
}

// pop takes the next item for the follower: the first ready one or, if
// live and none is ready, the first queued one (fromQueue: the follower
// has yet to merge it). ok is false if there is none; err is what ended
// the subscription.
func (s *sub) pop(live bool) (it Item, fromQueue, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
		return Item{}, false, false, s.err
	case len(s.ready) > 0:
		it = s.ready[0]
		s.ready[0] = Item{}
		s.ready = s.ready[1:]
		if len(s.ready) == 0 {
			s.ready = nil
		}
	case live && len(s.queue) > 0:
		it, fromQueue = s.queue[0], true
		s.queue[0] = Item{}
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = nil
		}
	default:
		return Item{}, false, false, nil
	}
	if it.shared == nil {
		s.ownLocked(-int64(itemBytes(it)))
	} else {
		s.bytes -= itemBytes(it)
	}
	s.since = s.h.tick.Load()
	return it, fromQueue, true, nil
}

// putReady adds items the follower hands out next: events it read from
// the log (its own, counted in full) or a live item it took and put
// behind them. The follower does so for its reader, which asked for the
// next item: it counts as having handed something out. If the
// subscription has ended, they are released and its error returned.
func (s *sub) putReady(items ...Item) error {
	var own int64
	bytes := 0
	for _, it := range items {
		if it.shared == nil {
			own += int64(itemBytes(it))
		} else {
			bytes += itemBytes(it)
		}
	}
	s.h.reserve(own) // shed others first; these are the reader's whatever it finds
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		s.h.release(items)
		return s.err
	}
	s.since = s.h.tick.Load()
	s.ready = append(s.ready, items...)
	s.bytes += bytes
	s.ownLocked(own)
	return nil
}

// lend adds n (less than 0: takes) to what s holds alone for the reader
// of its Subscription: items waiting in its channel. Once s has ended,
// what it held is let go already, and lend does nothing.
func (s *sub) lend(n int64) {
	if n > 0 {
		s.h.reserve(n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.ownLocked(n)
	}
}

// ownLocked adds n (less than 0: takes) to what s holds alone, and to the
// hub's held; s.mu is held.
func (s *sub) ownLocked(n int64) {
	s.own += n
	s.h.held.Add(n)
}

// fail ends s with err unless it has ended; it reports whether it did.
func (s *sub) fail(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.dropLocked(err)
	return true
}

// dropLocked ends s with err: what it holds is let go at once (the item
// its follower is handing out, if any, is released by the follower). s.mu
// is held and s.err is nil.
func (s *sub) dropLocked(err error) {
	s.h.release(s.queue)
	s.h.release(s.ready) // its live items; what is its own goes with own
	s.ownLocked(-s.own)
	s.queue, s.ready, s.bytes, s.hold = nil, nil, 0, 0
	s.err = err
	close(s.dead)
	s.kicked()
}

func (s *sub) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// kicked calls kick, if set; s.mu is held.
func (s *sub) kicked() {
	if s.kick != nil {
		s.kick()
	}
}

// failure returns the error that ended the subscription, nil while it lives.
func (s *sub) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Follows reports whether a conversation has subscribers here.
func (h *Hub) Follows(conversationID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[conversationID]) > 0
}
