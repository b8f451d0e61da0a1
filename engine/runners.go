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

type runnerKey struct{ conversationID, agentID string }

// runnerHandle is one attached runner connection.
type runnerHandle struct {
	agentID string
	// push hands the connection a frame to send (a prompt or an abort).
	push func(frame []byte)
	// prompt is the id of the last prompt dispatched to this connection
	// (guarded by Engine.mu).
	prompt string
}

// AttachRunner records that a runner of agentID is connected to a
// conversation; push sends it frames (prompts, aborts). Call the returned
// function when it disconnects: its prompt goes back to the queue and its
// streaming messages wait the grace period for it.
func (e *Engine) AttachRunner(conversationID, agentID string, push func(frame []byte)) (detach func()) {
	k := runnerKey{conversationID, agentID}
	h := &runnerHandle{agentID: agentID, push: push}
	e.mu.Lock()
	e.runners[k] = append(e.runners[k], h)
	e.mu.Unlock()
	e.kickDispatch(conversationID)
	done := false
	return func() {
		e.mu.Lock()
		if done {
			e.mu.Unlock()
			return
		}
		done = true
		e.runners[k] = slices.DeleteFunc(e.runners[k], func(x *runnerHandle) bool { return x == h })
		left, held := len(e.runners[k]), h.prompt
		if left == 0 {
			delete(e.runners, k)
		}
		e.mu.Unlock()
		switch {
		case left == 0:
			e.requeue(conversationID, agentID, "")
			e.orphanTimer(conversationID, agentID)
		case held != "":
			// Another connection of the agent is here (it reconnected
			// before this one was found dead): the prompt this one was
			// given goes back to the queue and on to the newest one.
			e.requeue(conversationID, agentID, held)
		}
	}
}

func (e *Engine) runnerAttached(conversationID, agentID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.runners[runnerKey{conversationID, agentID}]) > 0
}

// runnersOf returns the attached runners of a conversation, by agent id.
func (e *Engine) runnersOf(conversationID string) []*runnerHandle {
	e.mu.Lock()
	defer e.mu.Unlock()
	var hs []*runnerHandle
	for k, list := range e.runners {
		if k.conversationID == conversationID && len(list) > 0 {
			hs = append(hs, list[len(list)-1]) // the newest connection of each agent
		}
	}
	slices.SortFunc(hs, func(a, b *runnerHandle) int { return strings.Compare(a.agentID, b.agentID) })
	return hs
}

// watchOrphans starts the grace period for every agent that has streaming
// messages in s and no runner attached (after a restart, all of them).
func (e *Engine) watchOrphans(conversationID string, s conv.State) {
	agents := map[string]bool{}
	for _, st := range s.Streams {
		agents[st.AgentID] = true
	}
	for _, agent := range slices.Sorted(maps.Keys(agents)) {
		if !e.runnerAttached(conversationID, agent) {
			e.orphanTimer(conversationID, agent)
		}
	}
}

// orphanTimer finalizes an agent's streaming messages canceled after the
// grace period, unless one of its runners has come back by then.
func (e *Engine) orphanTimer(conversationID, agentID string) {
	time.AfterFunc(e.opts.RunnerGrace, func() {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return
		}
		e.wg.Add(1)
		e.mu.Unlock()
		defer e.wg.Done()
		if e.runnerAttached(conversationID, agentID) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.cancelStreams(ctx, conversationID, agentID); err != nil && !errors.Is(err, context.Canceled) {
			e.opts.Logger.Warn("finalizing orphaned messages failed", slog.String("conversation", conversationID), slog.Any("err", err))
		}
	})
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
