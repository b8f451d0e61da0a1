package runners

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Runner presence across nodes. When several nodes share one store
// (engine.Shared), a runner may be attached to any of them, and each node
// must know of the others' runners: before it ends a runner's streaming
// messages after the grace period, and to name the agents that have a
// runner in guidance (which agrees on every node). Each node records its
// runners in the store as a lease (store.RenewRunners), renewed every third
// of Options.PresenceLease and at once when a runner comes or goes; a node
// that dies stops renewing, and its runners count as gone once the lease
// ends. With one node (SQLite), none of this runs: what is attached here is
// all there is.

// kickPresence asks KeepPresence to record this node's runners now.
func (d *Dispatcher) kickPresence() {
	if !d.eng.Shared() {
		return
	}
	select {
	case d.presenceKick <- struct{}{}:
	default: // a renewal is due already
	}
}

// KeepPresence records this node's runners in the store and reads the
// other nodes' until ctx ends or the Dispatcher closes (it returns at once
// with one node). A failed renewal is logged and tried again at the next
// beat; meanwhile the others may take this node's runners for gone once
// the lease ends.
func (d *Dispatcher) KeepPresence(ctx context.Context) {
	if !d.eng.Shared() {
		return
	}
	t := time.NewTicker(d.opts.PresenceLease / 3)
	defer t.Stop()
	for {
		if err := d.renewPresence(ctx); err != nil && ctx.Err() == nil {
			d.opts.Logger.Warn("recording this node's runners failed", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-d.done:
			return
		case <-t.C:
		case <-d.presenceKick:
		}
	}
}

// renewPresence writes this node's lease and refreshes what it knows of
// the others', then sends the conversations whose runners changed their
// new guidance.
func (d *Dispatcher) renewPresence(ctx context.Context) error {
	now := d.opts.Now()
	st := d.store
	d.mu.Lock()
	var mine []store.RunnerLease
	for id, byAgent := range d.runners {
		for agent, hs := range byAgent {
			if len(hs) > 0 {
				mine = append(mine, store.RunnerLease{ConversationID: id, AgentID: agent})
			}
		}
	}
	for agent, hs := range d.wide {
		if len(hs) > 0 {
			mine = append(mine, store.RunnerLease{ConversationID: store.AllConversations, AgentID: agent})
		}
	}
	d.mu.Unlock()
	err := st.RenewRunners(ctx, store.RenewRunnersParams{Node: d.node, Runners: mine, Until: parley.NewTime(now.Add(d.opts.PresenceLease))})
	if err != nil {
		return err
	}
	live, err := st.LiveRunners(ctx, store.LiveRunnersParams{Now: parley.NewTime(now)})
	if err != nil {
		return err
	}
	remote, remoteWide := map[string][]string{}, map[string]bool{}
	for _, r := range live {
		switch {
		case r.Node == d.node:
		case r.ConversationID == store.AllConversations:
			remoteWide[r.AgentID] = true
		default:
			remote[r.ConversationID] = append(remote[r.ConversationID], r.AgentID)
		}
	}
	for id, agents := range remote {
		slices.Sort(agents)
		remote[id] = slices.Compact(agents)
	}
	d.mu.Lock()
	var changed []string
	for id, agents := range remote {
		if !slices.Equal(d.remote[id], agents) {
			changed = append(changed, id)
		}
	}
	for id := range d.remote {
		if _, ok := remote[id]; !ok {
			changed = append(changed, id)
		}
	}
	// The agents whose agent-wide runners elsewhere came or went: each
	// answers in every conversation of its agent.
	var wideChanged []string
	for agent := range remoteWide {
		if !d.remoteWide[agent] {
			wideChanged = append(wideChanged, agent)
		}
	}
	for agent := range d.remoteWide {
		if !remoteWide[agent] {
			wideChanged = append(wideChanged, agent)
		}
	}
	d.remote, d.remoteWide = remote, remoteWide
	d.mu.Unlock()
	d.eng.ReguideAgents(wideChanged...)
	for _, id := range changed {
		d.eng.Reguide(id)
	}
	return nil
}

// elsewhere reports whether a runner of agentID is attached to the
// conversation on another node, as the store says now (never with one node).
func (d *Dispatcher) elsewhere(ctx context.Context, conversationID, agentID string) (bool, error) {
	if !d.eng.Shared() {
		return false, nil
	}
	live, err := d.store.LiveRunners(ctx, store.LiveRunnersParams{ConversationID: conversationID, Now: parley.NewTime(d.opts.Now())})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(live, func(r store.RunnerLease) bool { return r.AgentID == agentID && r.Node != d.node }), nil
}
