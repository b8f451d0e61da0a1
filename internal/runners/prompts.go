package runners

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// kick dispatches a conversation's next prompt in the background.
func (d *Dispatcher) kick(conversationID string) {
	d.background(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.dispatch(ctx, conversationID); err != nil && parley.ErrorCode(err) != parley.EUNAVAILABLE {
			d.opts.Logger.Warn("dispatch failed", slog.String("conversation", conversationID), slog.Any("err", err))
		}
	})
}

// kickWhenReady dispatches the next prompt of the conversation of s now,
// if a runner here may be handed it, and again when the collect prompt at
// the head of its queue (if any) has waited its window: a collect prompt
// is not ready before. With no runner for it here, it does nothing: the
// node that has one dispatches. It is called on every change of a
// conversation whose prompts wait, each delta of a message that holds the
// floor among them: the check reads nothing.
func (d *Dispatcher) kickWhenReady(s conv.State) {
	id := s.Conversation.ID
	hs, release := d.candidates(s)
	release()
	if len(hs) == 0 {
		return
	}
	if slices.ContainsFunc(hs, func(h *handle) bool { return d.eng.Dispatchable(s, h.agentID) }) {
		d.kick(id)
	}
	head := s.Queue[0]
	if head.Mode != conv.ModeCollect {
		return
	}
	wait := head.Until.Sub(d.opts.Now()) + time.Millisecond
	if wait <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if old := d.collect[id]; old != nil {
		old.Stop()
	}
	d.collect[id] = time.AfterFunc(wait, func() {
		d.mu.Lock()
		delete(d.collect, id)
		d.mu.Unlock()
		d.kick(id)
	})
}

// dispatch hands the conversation's next ready prompt to the first of its
// candidate runners it is for (see candidates), and pushes it there as a
// prompt frame.
func (d *Dispatcher) dispatch(ctx context.Context, conversationID string) error {
	var s conv.State
	if err := d.eng.Require(ctx, conversationID, func(st conv.State) error { s = st; return nil }); err != nil {
		return err
	}
	if len(s.Queue) == 0 || s.Active() != nil {
		return nil
	}
	hs, release := d.candidates(s)
	defer release()
	for _, h := range hs {
		p, err := d.eng.DispatchPrompt(ctx, conversationID, h.agentID)
		if err != nil {
			return err
		}
		if p == nil {
			continue
		}
		d.mu.Lock()
		attached := d.attached(h)
		if attached {
			h.held[conversationID] = p.ID
			h.given++
			d.heldBy[conversationID] = h
			d.touch(h, conversationID)
		}
		d.mu.Unlock()
		if !attached {
			// It left while the prompt was being dispatched to it, and its
			// detach did not know to put the prompt back.
			d.requeue(conversationID, h.agentID, p.ID)
			return nil
		}
		h.push(PromptFrame(h.frameConversation(conversationID), p))
		d.redeliverInputs(conversationID, h) // what it asked before it (re)connected
		return nil
	}
	return nil
}

// attached reports whether h is still attached; d.mu must be held.
func (d *Dispatcher) attached(h *handle) bool {
	list := d.wide[h.agentID]
	if !h.wide() {
		list = d.runners[h.conversationID][h.agentID]
	}
	return slices.Contains(list, h)
}

// touch records that agent-wide connection h is at work in a
// conversation; d.mu must be held.
func (d *Dispatcher) touch(h *handle, conversationID string) {
	if h.wide() && !h.touched[conversationID] {
		h.touched[conversationID] = true
		d.wideConvs[conversationID]++
	}
}

// untouch forgets that h was at work in a conversation; d.mu must be held.
func (d *Dispatcher) untouch(h *handle, conversationID string) {
	if !h.touched[conversationID] {
		return
	}
	delete(h.touched, conversationID)
	if d.wideConvs[conversationID]--; d.wideConvs[conversationID] <= 0 {
		delete(d.wideConvs, conversationID)
	}
}

// requeue puts a departed runner's prompt back (see engine.Requeue).
func (d *Dispatcher) requeue(conversationID, agentID, promptID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.eng.Requeue(ctx, conversationID, agentID, promptID)
	if err != nil && parley.ErrorCode(err) != parley.EUNAVAILABLE && parley.ErrorCode(err) != parley.ENOTFOUND {
		d.opts.Logger.Warn("requeue failed", slog.String("conversation", conversationID), slog.Any("err", err))
	}
}

// pushAbort asks the connection of runner that answers prompt id to stop.
func (d *Dispatcher) pushAbort(conversationID, promptID, runner string) {
	if h := d.newestOf(conversationID, runner); h != nil {
		h.push(AbortFrame(h.frameConversation(conversationID), promptID))
	}
}

// abortedPrompt reads a prompt.aborted event: the prompt and its runner.
func abortedPrompt(ev parley.Event) (p struct {
	ID     string `json:"id"`
	Runner string `json:"runner"`
}, ok bool) {
	return p, json.Unmarshal(ev.Data, &p) == nil
}

// StopAnswer stops the answer to the prompt being answered in a
// conversation, or only to prompt promptID if given
// (engine.StopAnswer); its runner is told to stop, once more if the
// prompt was aborted already. It returns what it stopped.
func (d *Dispatcher) StopAnswer(ctx context.Context, conversationID string, a conv.Actor, promptID string) (*engine.Stopped, error) {
	st, err := d.eng.StopAnswer(ctx, conversationID, a, promptID)
	if err == nil && st.Again {
		d.pushAbort(conversationID, st.PromptID, st.Runner)
	}
	return st, err
}

// Revert reverts a conversation from the earliest of the named messages
// (engine.Revert) and tells its runners here which message it reverted
// from, so that they drop what they hold of it.
func (d *Dispatcher) Revert(ctx context.Context, conversationID string, a conv.Actor, messageIDs ...string) (*engine.RevertResult, error) {
	r, err := d.eng.Revert(ctx, conversationID, a, messageIDs...)
	if err != nil || r.Target == "" {
		return r, err
	}
	for _, h := range d.tellAll(conversationID) {
		h.push(RevertFrame(h.frameConversation(conversationID), r.Target))
	}
	return r, nil
}
