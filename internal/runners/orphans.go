package runners

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// A runner streams an agent's responses. While one of the agent's runners
// is attached to a conversation (on any node), the agent's streaming
// messages there wait for it; once none is, they wait Options.Grace for
// one to come back and are then finalized canceled. A runner that returns
// in time continues the same message. With several nodes, a runner whose
// agent wrote in the conversation within the last PresenceLease counts as
// attached somewhere even if its node's lease is not in the store yet (a
// node slow to write it): it is alive, and writing.

// watchOrphans starts the grace period for every agent that has streaming
// messages in s and no runner attached here (after a restart, all of them),
// unless it runs already.
func (d *Dispatcher) watchOrphans(conversationID string, s conv.State) {
	if s.Streams.Len() == 0 {
		return
	}
	agents := map[string]bool{}
	for _, st := range s.Streams.All() {
		agents[st.AgentID] = true
	}
	for _, agent := range slices.Sorted(maps.Keys(agents)) {
		if !d.attachedHere(conversationID, agent) {
			d.orphanTimer(conversationID, agent, false, d.opts.Grace)
		}
	}
}

// orphanTimer finalizes an agent's streaming messages canceled after wait
// (the grace period), unless one of its runners has come back by then,
// here or on another node. restart starts the wait over if it runs
// already (a runner just left); otherwise the running one stands.
func (d *Dispatcher) orphanTimer(conversationID, agentID string, restart bool, wait time.Duration) {
	key := conversationID + "\x00" + agentID
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if old := d.orphans[key]; old != nil {
		if !restart {
			return
		}
		old.Stop() // if it fired already, it finds itself replaced and stops
	}
	var t *time.Timer
	t = time.AfterFunc(wait, func() {
		d.mu.Lock()
		if d.orphans[key] != t || d.closed {
			d.mu.Unlock()
			return
		}
		delete(d.orphans, key)
		here := d.attachedLocked(conversationID, agentID)
		// Did its runner write within a lease, through another node?
		quiet := d.opts.PresenceLease - d.opts.Now().Sub(d.wrote[key]) // how long until it has not
		writing := d.eng.Shared() && quiet > 0
		if here || !writing {
			delete(d.wrote, key) // this grace period ends here, one way or another
		}
		d.wg.Add(1)
		d.mu.Unlock()
		defer d.wg.Done()
		switch {
		case here:
			return
		case writing:
			d.orphanTimer(conversationID, agentID, false, quiet) // look again once it has been quiet for a lease
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if elsewhere, err := d.elsewhere(ctx, conversationID, agentID); elsewhere || err != nil {
			// Its runner is on another node (or the store cannot say):
			// look again after another grace period, for that node may die.
			d.orphanTimer(conversationID, agentID, false, d.opts.Grace)
			return
		}
		err := d.eng.CancelStreams(ctx, conversationID, agentID)
		if err != nil && !errors.Is(err, context.Canceled) && parley.ErrorCode(err) != parley.ENOTFOUND && parley.ErrorCode(err) != parley.EUNAVAILABLE {
			d.opts.Logger.Warn("finalizing orphaned messages failed", slog.String("conversation", conversationID), slog.Any("err", err))
		}
	})
	d.orphans[key] = t
}

// heard notes, for the grace periods running in a conversation, the
// newest event of their agent among events (when it was written).
func (d *Dispatcher) heard(conversationID string, events []parley.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range events {
		key := conversationID + "\x00" + ev.AgentID
		if d.orphans[key] != nil && ev.Time.After(d.wrote[key]) {
			d.wrote[key] = ev.Time.Time
		}
	}
}
