package engine

import (
	"context"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// Runners is what the engine needs of the runner connections, which package
// dispatch keeps: which agents have a runner (guidance names the one that
// will answer), whether a conversation has runners on this node (it then
// stays cached, for it is through the cache that they hear what other nodes
// write), and word of every change, so that prompts are dispatched, aborts
// pushed and the runners of streaming messages awaited.
type Runners interface {
	// Agents returns the agents with a runner for the conversation of s,
	// on this node or on another, sorted: its own runners, and the
	// agent-wide runners of the agents that take part in it.
	Agents(s conv.State) []string
	// Here reports whether a runner of the conversation is attached to
	// this node.
	Here(conversationID string) bool
	// AgentWide reports whether agent-wide runners are attached to this
	// node: a prompt queued anywhere may be theirs to answer.
	AgentWide() bool
	// Changed tells of a conversation's new state and the events that made
	// it. It is called holding the conversation's lock, so it must not
	// block, and may call the engine only in the background.
	Changed(Change)
	// Deleted tells that a conversation was deleted; err says so, for its
	// runners.
	Deleted(conversationID string, err *parley.Error)
}

// Change is what Runners.Changed is told.
type Change struct {
	ConversationID string
	State          conv.State
	Events         []parley.Event
	// Loaded is set when the state was read from the store (a first load,
	// a reload, a catch-up with other nodes' writes) rather than written
	// here: streaming messages in it may have lost their runner.
	Loaded bool
}

// noRunners is the Runners of an engine that has none (no dispatcher).
type noRunners struct{}

func (noRunners) Agents(conv.State) []string    { return nil }
func (noRunners) Here(string) bool              { return false }
func (noRunners) AgentWide() bool               { return false }
func (noRunners) Changed(Change)                {}
func (noRunners) Deleted(string, *parley.Error) {}

// SetRunners makes r the engine's runners (package dispatch does it for
// itself). Call it before the engine is used.
func (e *Engine) SetRunners(r Runners) { e.runners = r }

// Shared reports whether other nodes write into the engine's store
// (Options.Shared).
func (e *Engine) Shared() bool { return e.opts.Shared }

// Reguide publishes a cached conversation's guidance if it changed without
// an event (a runner came or went).
func (e *Engine) Reguide(id string) {
	e.cache.withLoaded(id, func(c *conversation) {
		e.publish(c, id, nil)
		e.scheduleTurnLapse(c, id) // the open turn's owner may have come or gone
	})
}

// CancelStreams finalizes every streaming message of agentID canceled: its
// runner is gone, so the turn it owns ends with it. It returns ENOTFOUND
// for an unknown conversation.
func (e *Engine) CancelStreams(ctx context.Context, conversationID, agentID string) error {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return err
	}
	var ids []string
	for id, st := range c.state.Streams.All() {
		if st.AgentID == agentID {
			ids = append(ids, id)
		}
	}
	closed := c.state.Closed
	c.mu.Unlock()
	if closed {
		return nil
	}
	slices.Sort(ids)
	for _, id := range ids {
		// No finality given: the rules close the runner's turn if it owns it.
		_, err := e.FinalizeMessage(ctx, conversationID, conv.FinalizeMessage{Actor: conv.Actor{AgentID: agentID}, MessageID: id, Reason: parley.FinishCanceled})
		if err != nil && parley.ErrorCode(err) != parley.ENOTFOUND { // finalized meanwhile: fine
			return err
		}
	}
	return nil
}

// recoverPageBytes bounds a page of conversations RecoverStreams reads.
const recoverPageBytes = 8 << 20

// RecoverStreams loads every conversation that has streaming messages, as
// after a restart: the load tells the runners (Change.Loaded), which give
// those messages' runners the grace period to come back. It reads the
// conversations' state snapshots, page by page, and returns how many it
// loaded. The pages are in order of last activity: a conversation written
// to during the walk moves above its cursor and may be passed over, which
// leaves nothing behind, as a write loads its conversation.
func (e *Engine) RecoverStreams(ctx context.Context) (int, error) {
	n := 0
	for cursor := ""; ; {
		recs, next, err := e.store.ListConversations(ctx, store.ListConversationsParams{Cursor: cursor, Limit: 1000, MaxBytes: recoverPageBytes})
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			s, err := stateOf(r)
			if err != nil {
				return n, err
			}
			if s.Streams.Len() > 0 {
				c, err := e.lockLoaded(ctx, r.Conversation.ID)
				if err != nil {
					return n, err
				}
				c.mu.Unlock()
				n++
			}
		}
		if next == "" {
			return n, nil
		}
		cursor = next
	}
}

// ReguideAgents publishes the guidance of every cached conversation that
// one of agents takes part in, if it changed without an event (an
// agent-wide runner of one of them came or went: it answers in every
// conversation its agent takes part in). It looks at those conversations
// alone (see cache.members), however many others are cached.
func (e *Engine) ReguideAgents(agents ...string) {
	for _, id := range e.cache.of(agents...) {
		e.Reguide(id)
	}
}
