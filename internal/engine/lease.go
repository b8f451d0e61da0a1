package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Turn leases (see conv.ExpireTurn). Each node that has a conversation
// cached keeps a timer for the lease of its open turn, as it does for its
// claim: armed whenever the state changes, the conversation is loaded or
// caught up with other nodes' writes, or its runners come or go. When it
// fires, the node decides conv.ExpireTurn, which writes the turn.aborted
// tombstone only if the lease has ended on the state as the store has it:
// with several nodes, one of them writes it, the others catch up and find
// the turn closed. A conversation nobody has cached has its timer armed
// when someone next loads it (a write refused with turn_conflict, a
// prompt, a runner, a restart's recovery), for a whole lease from then
// (see leaseFromNow): a node that has just loaded it cannot know whether
// the owner's runner is about to come back.

// noteOwner records whether the open turn's owner has a runner attached
// (on any node): its lease counts from the last moment it was seen with
// one, so that a runner that goes away leaves its agent a whole lease to
// come back. c.mu must be held.
func (c *conversation) noteOwner(r Runners, now func() time.Time) {
	open := c.state.Open
	if open == nil {
		c.leaseTurn, c.ownerSeen, c.ownerHad = 0, time.Time{}, false
		return
	}
	if open.Turn != c.leaseTurn {
		c.leaseTurn, c.ownerSeen, c.ownerHad = open.Turn, time.Time{}, false
	}
	has := slices.Contains(r.Agents(c.state), open.Owner)
	if has || c.ownerHad {
		c.ownerSeen = now() // attached now, or until just now
	}
	c.ownerHad = has
}

// leaseFromNow gives the open turn of a conversation just loaded a whole
// lease from now: after a restart its owner's runner may not have come
// back yet, and this node has not seen whether it had one. c.mu must be
// held.
func (c *conversation) leaseFromNow(now time.Time) {
	if open := c.state.Open; open != nil {
		c.leaseTurn, c.ownerSeen, c.ownerHad = open.Turn, now, false
	}
}

// scheduleTurnLapse arms the timer of the open turn's lease; c.mu must be
// held.
func (e *Engine) scheduleTurnLapse(c *conversation, id string) {
	c.noteOwner(e.runners, e.opts.Now)
	open := c.state.Open
	if open != nil && !c.state.Closed && c.ownerHad && c.turnTimer != nil && c.armedTurn == open.Turn {
		// Its runner is attached and the timer will look again within a
		// lease: a runner streaming an answer re-arms nothing per delta.
		return
	}
	if c.turnTimer != nil {
		c.turnTimer.Stop()
		c.turnTimer = nil
	}
	if open == nil || c.state.Closed {
		return
	}
	c.armedTurn = open.Turn
	lease := c.state.TurnLease(e.opts.TurnLease)
	wait := c.state.TurnLapse(lease, c.ownerSeen).Sub(e.opts.Now()) + time.Millisecond
	if c.ownerHad {
		// Its runner is attached: look again in a lease (a runner that
		// goes is heard of at once, Reguide, but a node that dies is
		// heard of only when its presence lapses).
		wait = lease
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	c.turnTimer = time.AfterFunc(max(wait, time.Millisecond), func() { e.expireTurn(id) })
}

// expireTurn decides conv.ExpireTurn on a conversation whose lease timer
// fired, and arms the timer again if nothing was written.
func (e *Engine) expireTurn(id string) {
	// Add under e.mu and only while open, so that it happens before
	// Close's Wait: Close sets closed under e.mu first.
	if !e.track() {
		return
	}
	defer e.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c *conversation
	d, _, err := e.decide(ctx, id, func(s conv.State) (conv.Command, error) {
		c = e.cache.get(id)
		var since time.Time
		if c != nil { // its lock is held: build runs under it
			c.noteOwner(e.runners, e.opts.Now)
			since = c.ownerSeen
		}
		return conv.ExpireTurn{Lease: s.TurnLease(e.opts.TurnLease), Runners: e.runners.Agents(s), Since: since}, nil
	}, nil)
	if err != nil {
		if !errors.Is(err, context.Canceled) && parley.ErrorCode(err) != parley.ENOTFOUND && parley.ErrorCode(err) != parley.EUNAVAILABLE {
			e.opts.Logger.Warn("turn lease expiry failed", slog.String("conversation", id), slog.Any("err", err))
		}
		return
	}
	if len(d.Events) == 0 {
		e.cache.withLoaded(id, func(c *conversation) {
			c.turnTimer = nil // it fired: arm it again
			e.scheduleTurnLapse(c, id)
		})
	}
}

// schedule arms a conversation's timers: its claim's and its open turn's
// lease; c.mu must be held.
func (e *Engine) schedule(c *conversation, id string) {
	e.scheduleClaimExpiry(c, id)
	e.scheduleTurnLapse(c, id)
	e.scheduleInputExpiry(c, id)
}

// stopTimers stops a conversation's timers; c.mu must be held.
func (c *conversation) stopTimers() {
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.turnTimer != nil {
		c.turnTimer.Stop()
	}
	if c.inputTimer != nil {
		c.inputTimer.Stop()
	}
}
