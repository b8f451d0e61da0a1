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
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// Item is one thing a subscriber receives after its Init: an event of the log
// or a new guidance (exactly one of the two is set).
type Item struct {
	Event    *parley.Event
	Guidance *parley.Guidance
	// json is the event's JSON, made once for all the subscribers an event
	// was published to (see JSON).
	json *lazyJSON
	// fromLog marks an event a follower read from the log, which its
	// queue's bytes never counted.
	fromLog bool
}

// lazyJSON is an event's JSON, made by the first reader that asks.
type lazyJSON struct {
	once sync.Once
	b    []byte
}

// JSON returns the item's event as JSON (Event.AppendJSON), made once for
// every subscriber the event was published to. Callers must not change it.
func (it Item) JSON() []byte {
	if it.Event == nil {
		return nil
	}
	if it.json == nil {
		return it.Event.AppendJSON(nil)
	}
	it.json.once.Do(func() { it.json.b = it.Event.AppendJSON(make([]byte, 0, 160+len(it.Event.Data))) })
	return it.json.b
}

// ErrSlow ends a subscription whose reader fell too far behind. The reader can
// resume from its last position.
var ErrSlow = parley.Errorf(parley.EBUSY, "subscriber too slow: its buffer filled up; resume from the last position")

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
	// Subscribers counts the live subscriptions, SlowDisconnects those
	// ended for reading too slowly, Delivered the items handed to readers
	// (each may be nil).
	Subscribers     Gauge
	SlowDisconnects Counter
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
}

// New returns a Hub whose subscriptions read what they missed from log.
func New(log Reader, o Options) *Hub {
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 16 << 20
	}
	if o.Subscribers == nil {
		o.Subscribers = nop{}
	}
	if o.SlowDisconnects == nil {
		o.SlowDisconnects = nop{}
	}
	if o.Delivered == nil {
		o.Delivered = nop{}
	}
	return &Hub{log: log, opts: o, subs: make(map[string]map[*sub]struct{})}
}

// sub is one subscriber's queue of live items, bounded in items and in
// bytes: bytes counts what was queued and not yet handed to its reader
// (the items in the queue and those its pump took and still holds).
type sub struct {
	conversationID string
	limit          int
	maxBytes       int
	notify         chan struct{}
	dead           chan struct{} // closed when err is set

	mu    sync.Mutex
	queue []Item
	bytes int
	err   error
	// kick, if set, is called (with mu held) whenever items are queued or
	// err is set (see Follower.Notify).
	kick func()
	// joined is set once its join has fixed where it starts (see Join):
	// from then on End ends it.
	joined bool
}

// itemBytes is about what an item holds in memory: an event's data and
// its fields, or a guidance.
func itemBytes(it Item) int {
	if it.Event != nil {
		return len(it.Event.Data) + 256
	}
	return 256
}

func (h *Hub) add(conversationID string) *sub {
	s := &sub{conversationID: conversationID, limit: h.opts.Buffer, maxBytes: h.opts.BufferBytes, notify: make(chan struct{}, 1), dead: make(chan struct{})}
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
// overflow is ended with ErrSlow. Publish never blocks on a reader.
func (h *Hub) Publish(conversationID string, events []parley.Event, g *parley.Guidance) {
	items := make([]Item, 0, len(events)+1)
	for i := range events {
		items = append(items, Item{Event: &events[i], json: &lazyJSON{}})
	}
	if g != nil {
		items = append(items, Item{Guidance: g})
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs[conversationID] {
		if !s.push(items) {
			h.opts.SlowDisconnects.Inc()
		}
	}
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
		s.queue, s.bytes = nil, 0
		s.err = err
		close(s.dead)
		s.kicked()
	default:
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

// push appends items; it reports false if that overflowed the queue: more
// items than its limit, or more bytes than its maxBytes while it still
// holds some (a subscriber that holds nothing takes any one batch, so that
// a large event never drops a reader that keeps up).
func (s *sub) push(items []Item) bool {
	size := 0
	for _, it := range items {
		size += itemBytes(it)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return true
	}
	if len(s.queue)+len(items) > s.limit || (s.bytes > 0 && s.bytes+size > s.maxBytes) {
		s.queue, s.bytes = nil, 0
		s.err = ErrSlow
		close(s.dead)
		s.kicked()
		return false
	}
	s.queue = append(s.queue, items...)
	s.bytes += size
	s.wake()
	s.kicked()
	return true
}

// handed notes that an item taken from the queue reached the reader (or
// was skipped): what it holds no longer counts against the queue's bytes.
func (s *sub) handed(it Item) {
	s.mu.Lock()
	if s.err == nil {
		s.bytes -= itemBytes(it)
	}
	s.mu.Unlock()
}

func (s *sub) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.dead)
		s.kicked()
	}
	s.mu.Unlock()
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

// take returns the queued items, waiting up to wait for some (0: not at
// all, less than 0: as long as it takes; ErrIdle when none came), or the
// error that ended the subscription.
func (s *sub) take(ctx context.Context, wait time.Duration) ([]Item, error) {
	var timeout <-chan time.Time
	for {
		s.mu.Lock()
		items, err := s.queue, s.err
		s.queue = nil
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if len(items) > 0 {
			return items, nil
		}
		if wait == 0 {
			return nil, ErrIdle
		}
		if wait > 0 && timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-s.notify:
		case <-s.dead:
		case <-timeout:
			return nil, ErrIdle
		case <-ctx.Done():
			return nil, ctx.Err()
		}
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
