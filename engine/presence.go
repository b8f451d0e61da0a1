package engine

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// Runner presence across nodes. When several nodes share one store
// (Options.Shared), a runner may be attached to any of them, and each node
// must know of the others' runners: before it ends a runner's streaming
// messages after the grace period, and to name the agents that have a
// runner in guidance (which agrees on every node). Each node records its
// runners in the store as a lease (store.RenewRunners), renewed every third
// of Options.PresenceLease and at once when a runner comes or goes; a node
// that dies stops renewing, and its runners count as gone once the lease
// ends. With one node (SQLite), none of this runs: what is attached here is
// all there is.

// kickPresence asks KeepPresence to record this node's runners now.
func (e *Engine) kickPresence() {
	if !e.opts.Shared {
		return
	}
	select {
	case e.presenceKick <- struct{}{}:
	default: // a renewal is due already
	}
}

// KeepPresence records this node's runners in the store and reads the
// other nodes' until ctx ends (it returns at once unless Options.Shared).
// A failed renewal is logged and tried again at the next beat; meanwhile
// the others may take this node's runners for gone once the lease ends.
func (e *Engine) KeepPresence(ctx context.Context) {
	if !e.opts.Shared {
		return
	}
	t := time.NewTicker(e.opts.PresenceLease / 3)
	defer t.Stop()
	for {
		if err := e.renewPresence(ctx); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("recording this node's runners failed", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-e.done:
			return
		case <-t.C:
		case <-e.presenceKick:
		}
	}
}

// renewPresence writes this node's lease and refreshes what it knows of
// the others', then sends the conversations whose runners changed their
// new guidance.
func (e *Engine) renewPresence(ctx context.Context) error {
	now := e.opts.Now()
	e.mu.Lock()
	var mine []store.RunnerLease
	for id, byAgent := range e.runners {
		for agent, hs := range byAgent {
			if len(hs) > 0 {
				mine = append(mine, store.RunnerLease{ConversationID: id, AgentID: agent})
			}
		}
	}
	e.mu.Unlock()
	err := e.store.RenewRunners(ctx, store.RenewRunnersParams{Node: e.owner, Runners: mine, Until: parley.NewTime(now.Add(e.opts.PresenceLease))})
	if err != nil {
		return err
	}
	live, err := e.store.LiveRunners(ctx, store.LiveRunnersParams{Now: parley.NewTime(now)})
	if err != nil {
		return err
	}
	remote := map[string][]string{}
	for _, r := range live {
		if r.Node != e.owner {
			remote[r.ConversationID] = append(remote[r.ConversationID], r.AgentID)
		}
	}
	for id, agents := range remote {
		slices.Sort(agents)
		remote[id] = slices.Compact(agents)
	}
	e.mu.Lock()
	var changed []string
	for id := range e.convs {
		if !slices.Equal(e.remote[id], remote[id]) {
			changed = append(changed, id)
		}
	}
	e.remote = remote
	e.mu.Unlock()
	for _, id := range changed {
		e.reguide(id)
	}
	return nil
}

// runnerElsewhere reports whether a runner of agentID is attached to the
// conversation on another node, as the store says now (never with one node).
func (e *Engine) runnerElsewhere(ctx context.Context, conversationID, agentID string) (bool, error) {
	if !e.opts.Shared {
		return false, nil
	}
	live, err := e.store.LiveRunners(ctx, store.LiveRunnersParams{ConversationID: conversationID, Now: parley.NewTime(e.opts.Now())})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(live, func(r store.RunnerLease) bool { return r.AgentID == agentID && r.Node != e.owner }), nil
}
