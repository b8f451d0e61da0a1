package engine

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/store"
)

// A runner streams an agent's responses over a connection. While at least
// one runner of an agent is attached to a conversation, that agent's
// streaming messages wait for it; once none is, they wait RunnerGrace for
// one to come back and are then finalized canceled (seed 001's orphan
// clean-up). A runner that returns in time continues the same message.

// runnerHandle is one attached runner connection.
type runnerHandle struct {
	agentID string
	// push hands the connection a frame to send (a prompt or an abort).
	push func(frame []byte)
	// end, if set, closes the connection after the frames pushed before.
	end func()
	// prompt is the id of the last prompt dispatched to this connection
	// (guarded by Engine.mu).
	prompt string
	// dropped is set when its conversation was deleted (guarded by Engine.mu).
	dropped bool
}

// AttachRunner records that a runner of agentID is connected to a
// conversation; push sends it frames (prompts, aborts). end, if not nil, is
// called when the conversation is deleted, after push was given an error
// frame saying so: the connection must then send what it was pushed and
// close. Call the returned function when it disconnects: its prompt goes
// back to the queue and its streaming messages wait the grace period for it
// (unless the conversation was deleted).
func (e *Engine) AttachRunner(conversationID, agentID string, push func(frame []byte), end func()) (detach func()) {
	h := &runnerHandle{agentID: agentID, push: push, end: end}
	e.mu.Lock()
	byAgent := e.runners[conversationID]
	if byAgent == nil {
		byAgent = make(map[string][]*runnerHandle)
		e.runners[conversationID] = byAgent
	}
	byAgent[agentID] = append(byAgent[agentID], h)
	e.mu.Unlock()
	e.kickPresence()
	e.kickDispatch(conversationID)
	e.reguide(conversationID)
	done := false
	return func() {
		e.mu.Lock()
		if done || h.dropped {
			done = true
			e.mu.Unlock()
			return
		}
		done = true
		byAgent := e.runners[conversationID]
		byAgent[agentID] = slices.DeleteFunc(byAgent[agentID], func(x *runnerHandle) bool { return x == h })
		left, held := len(byAgent[agentID]), h.prompt
		if left == 0 {
			delete(byAgent, agentID)
			if len(byAgent) == 0 {
				delete(e.runners, conversationID)
			}
		}
		e.mu.Unlock()
		e.kickPresence()
		switch {
		case left == 0:
			e.requeue(conversationID, agentID, "")
			e.orphanTimer(conversationID, agentID, true)
			e.reguide(conversationID)
		case held != "":
			// Another connection of the agent is here (it reconnected
			// before this one was found dead): the prompt this one was
			// given goes back to the queue and on to the newest one.
			e.requeue(conversationID, agentID, held)
		}
	}
}

// dropRunners forgets every runner connection of a deleted conversation
// and returns them; e.mu must be held.
func (e *Engine) dropRunners(conversationID string) []*runnerHandle {
	var hs []*runnerHandle
	for _, list := range e.runners[conversationID] {
		for _, h := range list {
			h.dropped = true
		}
		hs = append(hs, list...)
	}
	delete(e.runners, conversationID)
	return hs
}

func (e *Engine) runnerAttached(conversationID, agentID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.runners[conversationID][agentID]) > 0
}

// attached reports whether h is still attached; e.mu must be held.
func (e *Engine) attached(conversationID string, h *runnerHandle) bool {
	return slices.Contains(e.runners[conversationID][h.agentID], h)
}

// runnersOf returns the attached runners of a conversation, the newest
// connection of each agent, by agent id.
func (e *Engine) runnersOf(conversationID string) []*runnerHandle {
	e.mu.Lock()
	defer e.mu.Unlock()
	byAgent := e.runners[conversationID]
	hs := make([]*runnerHandle, 0, len(byAgent))
	for _, list := range byAgent {
		if len(list) > 0 {
			hs = append(hs, list[len(list)-1])
		}
	}
	slices.SortFunc(hs, func(a, b *runnerHandle) int { return strings.Compare(a.agentID, b.agentID) })
	return hs
}

// runnerAgents returns the agents with a runner attached to a conversation,
// on this node or (with a shared store) on another, sorted.
func (e *Engine) runnerAgents(conversationID string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	byAgent, remote := e.runners[conversationID], e.remote[conversationID]
	if len(byAgent) == 0 {
		return slices.Clone(remote)
	}
	agents := slices.AppendSeq(slices.Clone(remote), maps.Keys(byAgent))
	slices.Sort(agents)
	return slices.Compact(agents)
}

// watchOrphans starts the grace period for every agent that has streaming
// messages in s and no runner attached here (after a restart, all of them),
// unless it runs already.
func (e *Engine) watchOrphans(conversationID string, s conv.State) {
	agents := map[string]bool{}
	for _, st := range s.Streams {
		agents[st.AgentID] = true
	}
	for _, agent := range slices.Sorted(maps.Keys(agents)) {
		if !e.runnerAttached(conversationID, agent) {
			e.orphanTimer(conversationID, agent, false)
		}
	}
}

// orphanTimer finalizes an agent's streaming messages canceled after the
// grace period, unless one of its runners has come back by then, here or
// on another node. restart starts the grace period over if it runs
// already (a runner just left); otherwise the running one stands.
func (e *Engine) orphanTimer(conversationID, agentID string, restart bool) {
	key := conversationID + "\x00" + agentID
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if old := e.orphans[key]; old != nil {
		if !restart {
			return
		}
		old.Stop() // if it fired already, it finds itself replaced and stops
	}
	var t *time.Timer
	t = time.AfterFunc(e.opts.RunnerGrace, func() {
		e.mu.Lock()
		if e.orphans[key] != t || e.closed {
			e.mu.Unlock()
			return
		}
		delete(e.orphans, key)
		e.wg.Add(1)
		e.mu.Unlock()
		defer e.wg.Done()
		if e.runnerAttached(conversationID, agentID) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if elsewhere, err := e.runnerElsewhere(ctx, conversationID, agentID); elsewhere || err != nil {
			// Its runner is on another node (or the store cannot say):
			// look again after another grace period, for that node may die.
			e.orphanTimer(conversationID, agentID, false)
			return
		}
		err := e.cancelStreams(ctx, conversationID, agentID)
		if err != nil && !errors.Is(err, context.Canceled) && parley.ErrorCode(err) != parley.ENOTFOUND { // deleted meanwhile: nothing to finalize
			e.opts.Logger.Warn("finalizing orphaned messages failed", slog.String("conversation", conversationID), slog.Any("err", err))
		}
	})
	e.orphans[key] = t
}

// cancelStreams finalizes every streaming message of agentID canceled; the
// runner is gone, so the turn it owns ends with it.
func (e *Engine) cancelStreams(ctx context.Context, conversationID, agentID string) error {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return err
	}
	var ids []string
	for id, st := range c.state.Streams {
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

// RecoverStreams starts the grace period for every conversation that has
// streaming messages, as after a restart: their runners have to come back.
// It reads the conversations' state snapshots, page by page.
func (e *Engine) RecoverStreams(ctx context.Context) (int, error) {
	n := 0
	for cursor := ""; ; {
		recs, next, err := e.store.ListConversations(ctx, store.ListConversationsParams{Cursor: cursor, Limit: 1000})
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			s, err := stateOf(r)
			if err != nil {
				return n, err
			}
			if len(s.Streams) > 0 {
				c, err := e.lockLoaded(ctx, r.Conversation.ID) // loading watches the orphans
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
