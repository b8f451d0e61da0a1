package feed

import "context"

// A Broker tells a node of the appends that other nodes make to the store
// they share, and of the conversations they delete. A notification carries only (conversation, seq): the events
// are read from the log, so a notification lost or merged with another
// costs latency, never data.
type Broker interface {
	// Listen calls notified for each append (or delete) another node
	// made, and
	// caughtUp whenever notifications may have been missed (at its start
	// and after it reconnects), until ctx ends.
	Listen(ctx context.Context, notified func(Notice), caughtUp func())
}

// Notice is what a node hears of another's append or delete.
type Notice struct {
	ConversationID string
	// Seq is the conversation's last seq after the append.
	Seq int64
	// Queue is set when the append changed the conversation's prompt
	// queue: a node may have runners for it without following it.
	Queue bool
	// Deleted is set when the conversation was deleted (Seq is then 0): a
	// node that follows it ends its subscribers and runners there.
	Deleted bool
}

// Local is the Broker of a single node: no other node writes, so there is
// nothing to hear. Listen returns when ctx ends.
type Local struct{}

// Listen implements Broker.
func (Local) Listen(ctx context.Context, _ func(Notice), _ func()) { <-ctx.Done() }
