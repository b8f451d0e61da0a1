package feed

import "context"

// A Broker tells a node of the appends that other nodes make to the store
// they share. A notification carries only (conversation, seq): the events
// are read from the log, so a notification lost or merged with another
// costs latency, never data.
type Broker interface {
	// Listen calls notified for each (conversation, last seq) that another
	// node appended, and caughtUp whenever notifications may have been
	// missed (at its start and after it reconnects), until ctx ends.
	Listen(ctx context.Context, notified func(conversationID string, seq int64), caughtUp func())
}

// Local is the Broker of a single node: no other node writes, so there is
// nothing to hear. Listen returns when ctx ends.
type Local struct{}

// Listen implements Broker.
func (Local) Listen(ctx context.Context, _ func(string, int64), _ func()) { <-ctx.Done() }
