package engine

import (
	"sync"
	"sync/atomic"

	"github.com/parleyhq/parley"
)

// Connections counts the live connections of each token, bounds their
// number, and ends them when the token is revoked (tokens.Keeper does).
type Connections interface {
	// Connect records a live connection of who; end is called, once, when
	// it must end. Over max connections of who's token it returns
	// ERATELIMITED. Call release when the connection ends.
	Connect(who parley.Identity, max int, end func(error)) (release func(), err error)
}

// uncounted is the Connections of an engine given none: every connection
// is let in, and none is ended.
type uncounted struct{}

func (uncounted) Connect(parley.Identity, int, func(error)) (func(), error) { return func() {}, nil }

// conns records the engine's live streams with Options.Connections (so
// that revoking their token ends them, and their number is bounded), and
// those whose right to read rests on a delegation, by conversation, so
// that the end of the delegation ends them (see ConnectReader).
type conns struct {
	counted Connections
	mu      sync.Mutex
	// delegated holds, by conversation id, the streams of agents that read
	// it as delegates of its open turn; watching counts them, so that a
	// write looks at them without a lock when there are none.
	delegated readerSets
	watching  atomic.Int64
	// members holds, by conversation id, the streams of agents that read
	// it as members of it: a conversation.updated event that removes one
	// ends its streams (see endMembers).
	members readerSets
}

// liveConn is one live connection; end ends it (at most once).
type liveConn struct {
	once sync.Once
	end  func(error)
}

// stop ends the connection with err, unless it was ended before.
func (c *liveConn) stop(err error) { c.once.Do(func() { c.end(err) }) }

// add records a live connection of who with Options.Connections (see
// Connections.Connect).
func (m *conns) add(who parley.Identity, max int, end func(error)) (*liveConn, func(), error) {
	c := &liveConn{end: end}
	release, err := m.counted.Connect(who, max, c.stop)
	if err != nil {
		return nil, nil, err
	}
	return c, release, nil
}
