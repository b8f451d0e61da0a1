package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// PromptResult is the answer to EnqueuePrompt.
type PromptResult struct {
	ID    string                `json:"id"`
	Seq   int64                 `json:"seq"`
	Queue []parley.QueuedPrompt `json:"queue"`
	// Replayed is true when this is the stored result of an earlier request
	// with the same client request id.
	Replayed bool `json:"-"`
}

// EnqueuePrompt queues a prompt (the server makes its id unless given); the
// runners hear of it (Runners.Changed) and dispatch it when one is free. A
// steer prompt aborts the active response. It returns the errors of
// conv.Decide (409 busy for reject while busy).
func (e *Engine) EnqueuePrompt(ctx context.Context, conversationID string, p conv.EnqueuePrompt) (*PromptResult, error) {
	lookupID := p.ID // one made here cannot be taken
	if p.ID == "" {
		p.ID = NewID()
	}
	if p.Window <= 0 {
		p.Window = e.opts.CollectWindow
	}
	build := func(conv.State) (conv.Command, error) {
		known, err := lookups(ctx, e.store, conversationID, p.AgentID, p.ClientRequestID, lookupID, "", "")
		p.Known = known
		return p, err
	}
	// A retry gets the prompt's id and seq as first answered, and the
	// queue as it is now.
	respond := func(d conv.Decision) (*store.Idempotency, error) {
		return e.idempotency(conversationID, p.AgentID, p.ClientRequestID, p.RequestHash, d.Result.Seq, PromptResult{ID: p.ID, Seq: d.Result.Seq})
	}
	d, s, err := e.decide(ctx, conversationID, build, respond)
	if err != nil {
		return nil, err
	}
	if d.Replay != nil {
		var r PromptResult
		err := json.Unmarshal(d.Replay, &r)
		r.Queue, r.Replayed = s.Queue, true
		return &r, err
	}
	return &PromptResult{ID: p.ID, Seq: d.Result.Seq, Queue: s.Queue}, nil
}

// Prompts returns the queue: the dispatched prompt first, then the waiting
// ones, each saying what it waits for (conv.State.Explain).
func (e *Engine) Prompts(ctx context.Context, conversationID string) ([]parley.QueuedPrompt, error) {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	return e.explain(c), nil
}

// explain is the queue of c, each waiting prompt saying what it waits
// for; c.mu must be held.
func (e *Engine) explain(c *conversation) []parley.QueuedPrompt {
	c.noteOwner(e.runners, e.opts.Now)
	return c.state.Explain(e.runners.Agents(c.state), e.opts.Now(), c.state.TurnLease(e.opts.TurnLease), c.ownerSeen)
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

// Stopped is what StopAnswer stopped: the prompt, the message
// streaming its answer ("" if none), and its runner. Again is true when
// the prompt had been aborted already (nothing was written): its runner
// must be told again.
type Stopped struct {
	PromptID  string
	MessageID string
	Runner    string
	Again     bool
}

// StopAnswer stops the answer to the prompt being answered, or only to
// prompt promptID if it is given (ENOTANSWERING, with the prompt and
// message being answered, when that is not the prompt being answered):
// the prompt is marked aborted (it is never dispatched again), and its
// runner is told to stop (Runners.Changed sees the prompt.aborted event);
// it answers with "aborted". It returns ENOTFOUND when no prompt is being
// answered and none was named.
func (e *Engine) StopAnswer(ctx context.Context, conversationID string, a conv.Actor, promptID string) (*Stopped, error) {
	d, s, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) { return conv.AbortPrompt{Actor: a, ID: promptID}, nil }, nil)
	if err != nil {
		return nil, err
	}
	p, m := s.Answering()
	if p == "" {
		return nil, parley.Errorf(parley.ENOTFOUND, "no prompt is being answered in conversation %s", conversationID)
	}
	return &Stopped{PromptID: p, MessageID: m, Runner: s.Active().Runner, Again: len(d.Events) == 0}, nil
}

// Requeue puts the prompt a departed runner of agentID was answering (the
// prompt id, or with "" any) back at the front of the queue. A prompt that
// was aborted ends instead, and so does the answer its runner left
// streaming: nobody will finish it, and the prompt after it must not wait
// the grace period for the floor.
func (e *Engine) Requeue(ctx context.Context, conversationID, agentID, promptID string) error {
	d, _, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) {
		return conv.RequeuePrompt{Runner: agentID, ID: promptID}, nil
	}, nil)
	if err == nil && d.Result.EndedPrompt != "" {
		err = e.CancelStreams(ctx, conversationID, agentID)
	}
	return err
}

// Dispatched is a prompt handed to a runner: what its prompt frame says.
type Dispatched struct {
	ID            string          `json:"messageId"`
	Content       string          `json:"content"`
	MessageFormat string          `json:"messageFormat"`
	Channel       *parley.Channel `json:"channel"`
	AgentID       string          `json:"agentId"`
}

// Dispatchable reports whether DispatchPrompt would hand a runner of
// agentID a prompt now, in the conversation whose state is s (see
// conv.Dispatchable). It reads nothing.
func (e *Engine) Dispatchable(s conv.State, agentID string) bool {
	return conv.Dispatchable(s, agentID, e.env())
}

// DispatchPrompt hands the next prompt ready for a runner of agentID to it,
// if the conversation has one and is answering none. It returns nil when
// nothing was dispatched.
func (e *Engine) DispatchPrompt(ctx context.Context, conversationID, agentID string) (*Dispatched, error) {
	build := func(s conv.State) (conv.Command, error) {
		next := s.NextPrompt(agentID, e.opts.Now())
		if next == nil {
			return conv.DispatchPrompt{Runner: agentID}, nil // decides nothing
		}
		content, err := promptText(ctx, e.store, conversationID, next.Parts)
		return conv.DispatchPrompt{Runner: agentID, Content: content}, err
	}
	d, s, err := e.decide(ctx, conversationID, build, nil)
	if err != nil {
		return nil, err
	}
	a := s.Active()
	if len(d.Events) == 0 || a == nil || a.Runner != agentID {
		return nil, nil
	}
	content, err := promptText(ctx, e.store, conversationID, a.Parts)
	if err != nil {
		return nil, err
	}
	return &Dispatched{ID: a.ID, Content: content, MessageFormat: s.Conversation.MessageFormat, Channel: a.Channel, AgentID: a.AgentID}, nil
}

// revertPage is how many messages a revert looks at a read.
const revertPage = 1000

// promptText reads a prompt's text from its prompt.queued events in st.
func promptText(ctx context.Context, st store.Store, conversationID string, seqs []int64) (string, error) {
	var parts []string
	for _, seq := range seqs {
		evs, err := st.ReadEvents(ctx, store.ReadEventsParams{ConversationID: conversationID, After: seq - 1, Limit: 1})
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
	// Target is the earliest message named that was found: the one the
	// revert started from ("" when none was).
	Target string `json:"-"`
}

// MaxRevertIDs bounds the message ids one revert names: each is looked up
// while the conversation waits, and only the earliest counts.
const MaxRevertIDs = 100

// Revert removes the earliest of the named messages and every message after
// it. Unknown ids revert nothing; a malformed one is EINVALIDVALUE, more
// than MaxRevertIDs ETOOLARGE.
func (e *Engine) Revert(ctx context.Context, conversationID string, a conv.Actor, messageIDs ...string) (*RevertResult, error) {
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
	var target string
	build := func(s conv.State) (conv.Command, error) {
		target = ""
		cmd := conv.Revert{Actor: a}
		// Who may revert is decided on the state first, before a row is
		// read: an outsider costs nothing and learns nothing (not even
		// whether the message exists).
		if err := conv.Authorize(s, cmd); err != nil {
			return nil, err
		}
		// Then the messages are read by their keys, never their rows: a
		// revert from early in a conversation of large messages costs
		// what one of small ones does.
		var from *store.MessageKey // the first named in the log
		for _, id := range messageIDs {
			k, err := e.store.MessageKey(ctx, conversationID, id)
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				continue
			}
			if err != nil {
				return nil, err
			}
			if from == nil || k.Seq < from.Seq {
				from = k
			}
		}
		if from == nil {
			// Named messages that are gone (reverted before: a revert
			// repeated) revert nothing; ids no message ever had are
			// unknown.
			for _, id := range messageIDs {
				if taken, err := e.store.IDTaken(ctx, conversationID, id); err != nil || taken {
					return cmd, err
				}
			}
			if len(messageIDs) == 1 {
				return nil, parley.Errorf(parley.ENOTFOUND, "conversation %s has no message %q", conversationID, messageIDs[0])
			}
			return nil, parley.Errorf(parley.ENOTFOUND, "conversation %s has none of the messages %q", conversationID, messageIDs)
		}
		target, cmd.MessageID = from.ID, from.ID
		// Who wrote what it would remove, a page at a time; a writer it
		// may not remove ends the reading (Authorize refuses it below).
		for after := from.Seq - 1; ; {
			keys, err := e.store.ListMessageKeys(ctx, store.ListMessagesParams{ConversationID: conversationID, After: after, Limit: revertPage})
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				if len(cmd.Known) == e.opts.MaxRevert {
					return nil, parley.Errorf(parley.ETOOLARGE, "reverting %s would remove more than %d messages; revert from a later one", target, e.opts.MaxRevert)
				}
				cmd.Known, cmd.Authors = append(cmd.Known, k.ID), append(cmd.Authors, k.AgentID)
				if !s.CanManage(a, k.AgentID) {
					return cmd, nil
				}
			}
			if len(keys) < revertPage {
				return cmd, nil
			}
			after = keys[len(keys)-1].Seq
		}
	}
	d, _, err := e.decide(ctx, conversationID, build, nil)
	if err != nil {
		return nil, err
	}
	removed := d.Removed
	if removed == nil {
		removed = []string{}
	}
	return &RevertResult{Target: target, Removed: removed, Seq: d.Result.Seq}, nil
}
