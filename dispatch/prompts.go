package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
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

// kickWhenReady dispatches a conversation's next prompt now, and again
// when the collect prompt at the head of its queue (if any) has waited its
// window: a collect prompt is not ready before.
func (d *Dispatcher) kickWhenReady(conversationID string, s conv.State) {
	if len(d.newest(conversationID)) == 0 {
		return // no runner here: the node that has one dispatches
	}
	d.kick(conversationID)
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
	if old := d.collect[conversationID]; old != nil {
		old.Stop()
	}
	d.collect[conversationID] = time.AfterFunc(wait, func() {
		d.mu.Lock()
		delete(d.collect, conversationID)
		d.mu.Unlock()
		d.kick(conversationID)
	})
}

// dispatch hands the next ready prompt to the first attached runner it is
// for, and pushes it to that runner as a prompt frame.
func (d *Dispatcher) dispatch(ctx context.Context, conversationID string) error {
	for _, h := range d.newest(conversationID) {
		p, err := d.eng.DispatchPrompt(ctx, conversationID, h.agentID)
		if err != nil || p == nil {
			if err != nil {
				return err
			}
			continue
		}
		d.mu.Lock()
		h.prompt = p.ID
		attached := d.attached(conversationID, h)
		d.mu.Unlock()
		if !attached {
			// It left while the prompt was being dispatched to it, and its
			// detach did not know to put the prompt back.
			d.requeue(conversationID, h.agentID, p.ID)
			return nil
		}
		h.push(PromptFrame(p))
		return nil
	}
	return nil
}

// attached reports whether h is still attached; d.mu must be held.
func (d *Dispatcher) attached(conversationID string, h *handle) bool {
	for _, x := range d.runners[conversationID][h.agentID] {
		if x == h {
			return true
		}
	}
	return false
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

// pushAbort asks the newest connection of runner to stop answering prompt id.
func (d *Dispatcher) pushAbort(conversationID, promptID, runner string) {
	for _, h := range d.newest(conversationID) {
		if h.agentID == runner {
			h.push(AbortFrame(promptID))
			return
		}
	}
}

// abortedPrompt reads a prompt.aborted event: the prompt and its runner.
func abortedPrompt(ev parley.Event) (p struct {
	ID     string `json:"id"`
	Runner string `json:"runner"`
}, ok bool) {
	return p, json.Unmarshal(ev.Data, &p) == nil
}

// AbortResponse stops the answer to the prompt being answered in a
// conversation (engine.AbortResponse); its runner is told to stop, once
// more if the prompt was aborted already.
func (d *Dispatcher) AbortResponse(ctx context.Context, conversationID string, a conv.Actor) error {
	again, err := d.eng.AbortResponse(ctx, conversationID, a)
	if again != nil {
		d.pushAbort(conversationID, again.ID, again.Runner)
	}
	return err
}

// Revert reverts a conversation from the earliest of the named messages
// (engine.Revert) and tells its runners here which message it reverted
// from, so that they drop what they hold of it.
func (d *Dispatcher) Revert(ctx context.Context, conversationID string, a conv.Actor, messageIDs ...string) (*engine.RevertResult, error) {
	r, err := d.eng.Revert(ctx, conversationID, a, messageIDs...)
	if err != nil || r.Target == "" {
		return r, err
	}
	frame := RevertFrame(r.Target)
	for _, h := range d.newest(conversationID) {
		h.push(frame)
	}
	return r, nil
}
