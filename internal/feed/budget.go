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
// Before it adds to Held past Options.MemoryBytes, the hub makes room:
// it sheds subscribers, ending them with ErrShed, until what it adds fits
// (see reserve): first those that have taken nothing for longest (the
// hub's tick when each last handed something out, or began to hold
// something: joins and publishes move it), and of those the ones holding
// most. A subscriber that keeps reading takes what it is sent as it
// comes, so it is the last in that order, after any that stopped. A new
// one that would hold a frame no shedding makes room for is refused
// (Follower.Holding). Held passes the bound only by what is added at
// once by goroutines that each found room, and by a publish or a page of
// the log that no shedding makes room for (they are not refused: their
// readers would miss them).

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

// reserve makes room for n bytes about to be added to held: while held
// and n are more than MemoryBytes, it sheds subscribers (none if n alone
// is). It reports whether they fit. One goroutine sheds at a time; the others wait for it
// (only while the hub is full), and then look again.
func (h *Hub) reserve(n int64) bool {
	switch {
	case h.held.Load()+n <= h.opts.MemoryBytes:
		return true
	case n > h.opts.MemoryBytes:
		return false // no shedding makes room for it
	}
	h.shedding.Lock()
	defer h.shedding.Unlock()
	return h.shed(n)
}

// shed ends subscribers with ErrShed, those that have taken nothing for
// longest first, until held and n are no more than MemoryBytes. It
// reports whether they fit.
func (h *Hub) shed(n int64) bool {
	fits := func() bool { return h.held.Load()+n <= h.opts.MemoryBytes }
	if fits() {
		return true
	}
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
	for _, x := range holders {
		if fits() {
			return true
		}
		if x.s.fail(ErrShed) {
			h.opts.Shed.Inc()
			h.opts.SlowDisconnects.Inc()
		}
	}
	return fits()
}
