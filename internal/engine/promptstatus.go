package engine

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// PromptStatus returns where a prompt of the conversation stands: queued
// (and what it waits on), dispatched or answering (to which runner, in
// which message), or how it ended. It returns ENOTFOUND for an unknown
// conversation, or a prompt the conversation never had or that ended
// before the last conv.MaxEndedPrompts that did.
func (e *Engine) PromptStatus(ctx context.Context, conversationID, promptID string) (*parley.PromptStatus, error) {
	st, _, err := e.promptStatus(ctx, conversationID, promptID)
	return st, err
}

// promptStatus is PromptStatus, with the position of the state it read.
func (e *Engine) promptStatus(ctx context.Context, id, promptID string) (*parley.PromptStatus, parley.Position, error) {
	var pos parley.Position
	if !parley.ValidID(promptID) {
		return nil, pos, parley.Errorf(parley.EINVALIDVALUE, "prompt id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", promptID)
	}
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return nil, pos, err
	}
	var st *parley.PromptStatus
	err = e.readConsistent(ctx, c, id, func(s conv.State) error {
		var ok bool
		st, ok = s.PromptStatus(promptID, e.explain(c))
		pos = parley.Position{Seq: s.LastSeq, Epoch: s.Conversation.Epoch}
		if !ok {
			return parley.Errorf(parley.ENOTFOUND, "conversation %s has no prompt %s (or it ended before the last %d prompts that did)", id, promptID, conv.MaxEndedPrompts)
		}
		return nil
	})
	c.mu.Unlock()
	if err != nil {
		return nil, pos, err
	}
	if st.Runner != "" {
		// Its answer: the runner's newest message in the prompt's exchange
		// (the prompt's own message is the asker's, unless the runner asked).
		keys, err := e.store.ListMessageKeys(ctx, store.ListMessagesParams{ConversationID: id, TurnID: st.TurnID, AgentID: st.Runner, Latest: true, Limit: 2})
		if err != nil {
			return nil, pos, err
		}
		for i := len(keys) - 1; i >= 0; i-- {
			if k := keys[i]; k.ID != promptID && k.Seq <= pos.Seq {
				st.MessageID = k.ID
				break
			}
		}
		if st.MessageID != "" && st.State == parley.PromptStateDispatched {
			st.State = parley.PromptStateAnswering
		}
	}
	return st, pos, nil
}

// isPromptEnd reports whether an event ends a prompt.
func isPromptEnd(ev *parley.Event) bool {
	return ev != nil && (ev.Type == parley.EventPromptCompleted || ev.Type == parley.EventPromptCanceled)
}

// WaitPrompt is PromptStatus, waiting up to wait for the prompt to end:
// it follows the conversation's live feed (on any node, as streams do)
// and reads the status again when a prompt ends there. Past wait it
// returns the status as it is then. It returns ctx's error when ctx
// ends, and the error that ends the feed (the conversation deleted, a
// shutdown).
func (e *Engine) WaitPrompt(ctx context.Context, conversationID, promptID string, wait time.Duration) (*parley.PromptStatus, error) {
	st, pos, err := e.promptStatus(ctx, conversationID, promptID)
	if err != nil || st.Ended() || wait <= 0 {
		return st, err
	}
	deadline := time.Now().Add(wait)
	f, err := e.Follow(ctx, conversationID, &pos)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for check := true; ; {
		if check {
			// Read again: it may have ended between the first read and
			// the follow, or just now.
			if st, _, err = e.promptStatus(ctx, conversationID, promptID); err != nil || st.Ended() {
				return st, err
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return st, nil
		}
		it, err := f.Next(ctx, left)
		switch {
		case errors.Is(err, feed.ErrIdle):
			check = true // the wait is over: the status as it is now
		case err != nil:
			return nil, err
		default:
			check = isPromptEnd(it.Event)
		}
	}
}

// Following reports whether a stream or a wait on this node follows the
// conversation's live feed.
func (e *Engine) Following(conversationID string) bool { return e.hub.Follows(conversationID) }
