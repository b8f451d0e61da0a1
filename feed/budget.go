package feed

import (
	"cmp"
	"slices"
)

// What the hub holds for subscribers that have not taken it is bounded
// across all of them, not only per subscriber: a stream whose client
// reads nothing holds what was made for it until its write times out,
// and many of them (each within its own bounds) would hold without end.
//
// Held counts each live item once while any subscriber still holds it
// (queued, or taken and not handed out yet: a conversation's readers
// share its events), and in full what is a subscriber's own: events read
// from the log for it, and what its reader holds for it (its first
// frame, see Follower.Holding). Adding to it costs an atomic add per
// publish and per join; taking from it, an atomic add per item handed
// out on the item's count of holders, and one on Held when the last lets
// it go.
//
// When Held passes Options.MemoryBytes, subscribers are shed, ended with
// ErrShed, until it no longer does: first those that have taken nothing
// for longest (the hub's tick when each last handed something out, or
// began to hold something: joins and publishes move it), and of those
// the ones holding most. A subscriber that keeps reading takes what it
// is sent as it comes, so it is the last in that order, after any that
// stopped; a new one is after every other, so it is refused (shed as it
// joins) only if the others cannot make room.

// Held returns what the hub holds for its subscribers that they have not
// taken, in bytes (see Options.MemoryBytes).
func (h *Hub) Held() int64 { return h.held.Load() }

// release lets go of the live items one subscriber held: each that no
// other subscriber holds no longer counts in held.
func (h *Hub) release(items []Item) {
	var freed int64
	for _, it := range items {
		if sh := it.shared; sh != nil && sh.refs.Add(-1) == 0 {
			freed += sh.size
		}
	}
	if freed > 0 {
		h.held.Add(-freed)
	}
}

// release1 is release for one item.
func (h *Hub) release1(it Item) {
	if sh := it.shared; sh != nil && sh.refs.Add(-1) == 0 {
		h.held.Add(-sh.size)
	}
}

// enforce sheds subscribers while the hub holds more than MemoryBytes.
// One goroutine sheds at a time; another that finds it at work leaves it
// to it, and it looks again once done.
func (h *Hub) enforce() {
	for h.held.Load() > h.opts.MemoryBytes {
		if !h.shedding.TryLock() {
			return
		}
		shed := h.shed()
		h.shedding.Unlock()
		if !shed {
			return
		}
	}
}

// shed ends subscribers with ErrShed, those that have taken nothing for
// longest first, until the hub holds no more than MemoryBytes. It
// reports whether it ended any.
func (h *Hub) shed() bool {
	type holder struct {
		s     *sub
		since int64
		bytes int64
	}
	var holders []holder
	h.mu.RLock()
	for _, m := range h.subs {
		for s := range m {
			s.mu.Lock()
			if s.err == nil && (s.bytes > 0 || s.own > 0) {
				holders = append(holders, holder{s, s.since, int64(s.bytes) + s.own})
			}
			s.mu.Unlock()
		}
	}
	h.mu.RUnlock()
	slices.SortFunc(holders, func(a, b holder) int {
		return cmp.Or(cmp.Compare(a.since, b.since), cmp.Compare(b.bytes, a.bytes))
	})
	shed := false
	for _, x := range holders {
		if h.held.Load() <= h.opts.MemoryBytes {
			break
		}
		if x.s.fail(ErrShed) {
			h.opts.Shed.Inc()
			h.opts.SlowDisconnects.Inc()
			shed = true
		}
	}
	return shed
}
