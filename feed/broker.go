package feed

import "context"

// A Broker tells a node of the appends that other nodes make to the store
// they share. A notification carries only (conversation, seq): the events
// are read from the log, so a notification lost or merged with another
// costs latency, never data.
type Broker interface {
	// Listen calls notified for each append another node made, and
	// caughtUp whenever notifications may have been missed (at its start
	// and after it reconnects), until ctx ends.
	Listen(ctx context.Context, notified func(Notice), caughtUp func())
}

// Notice is what a node hears of another's append.
type Notice struct {
	ConversationID string
	// Seq is the conversation's last seq after the append.
	Seq int64
	// Queue is set when the append changed the conversation's prompt
	// queue: a node may have runners for it without following it.
	Queue bool
}

// Local is the Broker of a single node: no other node writes, so there is
// nothing to hear. Listen returns when ctx ends.
type Local struct{}

// Listen implements Broker.
func (Local) Listen(ctx context.Context, _ func(Notice), _ func()) { <-ctx.Done() }
