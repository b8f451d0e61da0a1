package tokens

import (
	"context"
	"sync"

	"github.com/parleyhq/parley"
)

// ErrRevoked ends the live connections of a revoked token.
var ErrRevoked = parley.Errorf(parley.EUNAUTHORIZED, "the token of this connection was revoked")

// connRetryAfterSeconds is what a connection refused for its identity's
// bound is told to wait: a slot frees whenever another connection ends.
const connRetryAfterSeconds = 5

// conns holds the live connections (streams and runners) of each identity,
// so that revoking a token ends them and their number can be bounded. The
// zero value is ready to use.
type conns struct {
	mu sync.Mutex
	by map[string]map[*liveConn]struct{} // by token id; "" is the open server's one identity
}

// liveConn is one live connection; end ends it (at most once).
type liveConn struct {
	once sync.Once
	end  func(error)
}

// stop ends the connection with err, unless it was ended before.
func (c *liveConn) stop(err error) { c.once.Do(func() { c.end(err) }) }

// Connect records a live connection of who: a stream or a runner. end is
// called, once, with the reason (ErrRevoked) when its token is revoked,
// here or elsewhere (see RecheckTokens), or when EndConnections names its
// identity; it must not block. max bounds the connections one identity
// (a token; every request of an open server is one identity) has at once,
// 0 for no bound: over it, Connect returns ERATELIMITED. Call release when
// the connection ends.
func (k *Keeper) Connect(who parley.Identity, max int, end func(error)) (release func(), err error) {
	c := &liveConn{end: end}
	key := who.TokenID
	m := &k.conns
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.by[key]
	if max > 0 && len(set) >= max {
		return nil, parley.Errorf(parley.ERATELIMITED, "this token has %d connections open (streams and runners), the most it may; close one, or retry later", len(set)).
			With("retryAfterSeconds", connRetryAfterSeconds)
	}
	if set == nil {
		if m.by == nil {
			m.by = make(map[string]map[*liveConn]struct{})
		}
		set = make(map[*liveConn]struct{})
		m.by[key] = set
	}
	set[c] = struct{}{}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.by[key], c)
		if len(m.by[key]) == 0 {
			delete(m.by, key)
		}
	}, nil
}

// EndConnections ends every live connection of a token ("" names those an
// open server let in) with err.
func (k *Keeper) EndConnections(tokenID string, err error) {
	m := &k.conns
	m.mu.Lock()
	ends := make([]*liveConn, 0, len(m.by[tokenID]))
	for c := range m.by[tokenID] {
		ends = append(ends, c)
	}
	m.mu.Unlock()
	for _, c := range ends {
		c.stop(err)
	}
}

// ids returns the token ids that have live connections.
func (m *conns) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.by))
	for id := range m.by {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// RecheckTokens reads every token once and, for each token that is live
// here (it has connections, or is cached) but revoked (or gone) in the
// store, ends its connections with ErrRevoked and forgets it, so that
// neither outlives a revocation made elsewhere (parley token revoke on the
// file, or another node) by more than the period this is called at. It
// returns how many tokens are not revoked.
func (k *Keeper) RecheckTokens(ctx context.Context) (live int, err error) {
	ts, err := k.store.ListTokens(ctx)
	if err != nil {
		return 0, err
	}
	valid := make(map[string]bool, len(ts))
	for _, t := range ts {
		if t.RevokedAt.IsZero() {
			valid[t.ID] = true
		}
	}
	for _, id := range append(k.conns.ids(), k.cache.ids()...) {
		if !valid[id] {
			k.cache.drop(id)
			k.EndConnections(id, ErrRevoked)
		}
	}
	return len(valid), nil
}
