package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/store"
)

// PromptResult is the answer to EnqueuePrompt.
type PromptResult struct {
	ID    string              `json:"id"`
	Seq   int64               `json:"seq"`
	Queue []conv.QueuedPrompt `json:"queue"`
}

// EnqueuePrompt queues a prompt (the server makes its id unless given) and
// dispatches it if a runner is free. A steer prompt aborts the active
// response. It returns the errors of conv.Decide (409 busy for reject while
// busy).
func (e *Engine) EnqueuePrompt(ctx context.Context, conversationID string, p conv.EnqueuePrompt) (*PromptResult, error) {
	if p.ID == "" {
		p.ID = NewID()
	}
	if p.Window <= 0 {
		p.Window = e.opts.CollectWindow
	}
	d, s, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) { return p, nil }, nil)
	if err != nil {
		return nil, err
	}
	if p.Mode == conv.ModeCollect {
		time.AfterFunc(p.Window+time.Millisecond, func() { e.kickDispatch(conversationID) })
	}
	return &PromptResult{ID: p.ID, Seq: d.Result.Seq, Queue: s.Queue}, nil
}

// Prompts returns the queue: the dispatched prompt first, then the waiting ones.
func (e *Engine) Prompts(ctx context.Context, conversationID string) ([]conv.QueuedPrompt, error) {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	return c.state.Queue, nil
}

// WithdrawPrompt removes a waiting prompt (ENOTFOUND, or EBUSY if dispatched).
func (e *Engine) WithdrawPrompt(ctx context.Context, conversationID string, c conv.WithdrawPrompt) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

// PromotePrompt moves a waiting prompt to the front.
func (e *Engine) PromotePrompt(ctx context.Context, conversationID string, c conv.PromotePrompt) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

// CompletePrompt ends the prompt dispatched to the actor's runner and
// dispatches the next one. A repeated complete changes nothing.
func (e *Engine) CompletePrompt(ctx context.Context, conversationID string, c conv.CompletePrompt) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

// AbortResponse stops the answer to the prompt being answered: the prompt
// is marked aborted (it is never dispatched again) and its runner is told to
// stop; it answers with "aborted". It returns ENOTFOUND when no prompt is
// being answered.
func (e *Engine) AbortResponse(ctx context.Context, conversationID string, a conv.Actor) error {
	d, s, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) { return conv.AbortPrompt{Actor: a}, nil }, nil)
	if err != nil {
		return err
	}
	if p := s.Active(); len(d.Events) == 0 && p != nil {
		e.pushAbort(conversationID, p.ID, p.Runner) // stopped before: tell the runner again
	}
	return nil
}

// tellRunners sends the runners what a decision asks of them: an abort to
// the runner of each prompt it aborted.
func (e *Engine) tellRunners(conversationID string, events []parley.Event) {
	for _, ev := range events {
		if ev.Type != conv.EventPromptAborted {
			continue
		}
		var p struct {
			ID     string `json:"id"`
			Runner string `json:"runner"`
		}
		if json.Unmarshal(ev.Data, &p) == nil {
			e.pushAbort(conversationID, p.ID, p.Runner)
		}
	}
}

// pushAbort asks the newest connection of runner to stop answering prompt id.
func (e *Engine) pushAbort(conversationID, promptID, runner string) {
	frame, _ := json.Marshal(map[string]string{"type": "abort", "messageId": promptID})
	for _, h := range e.runnersOf(conversationID) {
		if h.agentID == runner {
			h.push(frame)
			return
		}
	}
}

// requeue puts a departed runner's prompt (the prompt id, or with "" any)
// back at the front of the queue. A prompt that was aborted ends instead,
// and so does the answer its runner left streaming: nobody will finish it,
// and the prompt after it must not wait the grace period for the floor.
func (e *Engine) requeue(conversationID, agentID, promptID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, _, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) {
		return conv.RequeuePrompt{Runner: agentID, ID: promptID}, nil
	}, nil)
	if err == nil && d.Result.EndedPrompt != "" {
		err = e.cancelStreams(ctx, conversationID, agentID)
	}
	if err != nil && parley.ErrorCode(err) != parley.EUNAVAILABLE {
		e.opts.Logger.Warn("requeue failed", slog.String("conversation", conversationID), slog.Any("err", err))
	}
}

// kickDispatch tries to dispatch in the background (it must not run under a
// conversation's lock).
func (e *Engine) kickDispatch(conversationID string) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.dispatch(ctx, conversationID); err != nil && parley.ErrorCode(err) != parley.EUNAVAILABLE {
			e.opts.Logger.Warn("dispatch failed", slog.String("conversation", conversationID), slog.Any("err", err))
		}
	}()
}

// dispatch hands the next ready prompt to the first attached runner it is
// for, and pushes it to that runner as a prompt frame.
func (e *Engine) dispatch(ctx context.Context, conversationID string) error {
	for _, h := range e.runnersOf(conversationID) {
		var next *conv.QueuedPrompt
		build := func(s conv.State) (conv.Command, error) {
			next = s.NextPrompt(h.agentID, e.opts.Now())
			if next == nil {
				return conv.DispatchPrompt{Runner: h.agentID}, nil // decides nothing
			}
			content, err := e.promptText(ctx, conversationID, next.Parts)
			return conv.DispatchPrompt{Runner: h.agentID, Content: content}, err
		}
		d, s, err := e.decide(ctx, conversationID, build, nil)
		if err != nil {
			return err
		}
		if a := s.Active(); len(d.Events) > 0 && a != nil && a.Runner == h.agentID {
			content, err := e.promptText(ctx, conversationID, a.Parts)
			if err != nil {
				return err
			}
			frame, _ := json.Marshal(map[string]any{"type": "prompt", "messageId": a.ID, "content": content,
				"messageFormat": s.Conversation.MessageFormat, "channel": a.Channel, "agentId": a.AgentID})
			e.mu.Lock()
			h.prompt = a.ID
			attached := e.attached(conversationID, h)
			e.mu.Unlock()
			if !attached {
				// It left while the prompt was being dispatched to it, and
				// its detach did not know to put the prompt back.
				e.requeue(conversationID, h.agentID, a.ID)
				return nil
			}
			h.push(frame)
			return nil
		}
	}
	return nil
}

// promptText reads a prompt's text from its prompt.queued events.
func (e *Engine) promptText(ctx context.Context, conversationID string, seqs []int64) (string, error) {
	var parts []string
	for _, seq := range seqs {
		evs, err := e.store.ReadEvents(ctx, store.ReadEventsParams{ConversationID: conversationID, After: seq - 1, Limit: 1})
		if err != nil {
			return "", err
		}
		if len(evs) == 1 {
			var p struct {
				Content string `json:"content"`
			}
			_ = json.Unmarshal(evs[0].Data, &p)
			parts = append(parts, p.Content)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

// RevertResult is the answer to Revert.
type RevertResult struct {
	Removed []string `json:"removed"`
	Seq     int64    `json:"seq"`
}

// MaxRevertIDs bounds the message ids one revert names: each is looked up
// while the conversation waits, and only the earliest counts.
const MaxRevertIDs = 100

// Revert removes the earliest of the named messages and every message after
// it, and tells the attached runners when forward is set (a revert that came
// from a runner is not sent back). Unknown ids revert nothing; a malformed
// one is EINVALIDVALUE, more than MaxRevertIDs ETOOLARGE.
func (e *Engine) Revert(ctx context.Context, conversationID string, a conv.Actor, forward bool, messageIDs ...string) (*RevertResult, error) {
	if len(messageIDs) > MaxRevertIDs {
		return nil, parley.Errorf(parley.ETOOLARGE, "a revert names at most %d message ids, not %d", MaxRevertIDs, len(messageIDs))
	}
	// Each id is read once, however often it is named.
	messageIDs = slices.Compact(slices.Sorted(slices.Values(messageIDs)))
	for _, id := range messageIDs {
		if !parley.ValidID(id) {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "message id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", id)
		}
	}
	var target *parley.Message
	build := func(conv.State) (conv.Command, error) {
		target = nil
		for _, id := range messageIDs {
			m, err := e.store.GetMessage(ctx, conversationID, id)
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				continue
			}
			if err != nil {
				return nil, err
			}
			if target == nil || m.Seq < target.Seq {
				target = m
			}
		}
		cmd := conv.Revert{Actor: a}
		if target == nil {
			return cmd, nil
		}
		cmd.MessageID = target.ID
		ms, err := e.store.ListMessages(ctx, store.ListMessagesParams{ConversationID: conversationID, After: target.Seq - 1, Limit: e.opts.MaxRevert + 1})
		if len(ms) > e.opts.MaxRevert {
			return nil, parley.Errorf(parley.ETOOLARGE, "reverting %s would remove more than %d messages; revert from a later one", target.ID, e.opts.MaxRevert)
		}
		for _, m := range ms {
			cmd.Known, cmd.Authors = append(cmd.Known, m.ID), append(cmd.Authors, m.AgentID)
		}
		return cmd, err
	}
	d, _, err := e.decide(ctx, conversationID, build, nil)
	if err != nil {
		return nil, err
	}
	if forward && target != nil {
		frame, _ := json.Marshal(map[string]string{"type": "revert", "messageId": target.ID})
		for _, h := range e.runnersOf(conversationID) {
			h.push(frame)
		}
	}
	removed := d.Removed
	if removed == nil {
		removed = []string{}
	}
	return &RevertResult{Removed: removed, Seq: d.Result.Seq}, nil
}
