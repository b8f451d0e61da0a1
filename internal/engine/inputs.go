package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Input requests (see conv.AskInput). A runner asks in its streaming
// message; a person answers; the pending requests with an expiry end when
// it passes, by a timer each node keeps for the conversations it has
// cached (armed as the claim's is: whenever the state changes or is
// loaded).

// InputResult is the answer to AnswerInput: the seq of the event that
// ended the request (the first answer's, for the same answer again), the
// message it is in and, when the answer wrote it, the message as it is now.
type InputResult struct {
	MessageID string
	Seq       int64
	Message   *parley.Message
}

// AskInput opens an input request in the actor's streaming message.
func (e *Engine) AskInput(ctx context.Context, conversationID string, c conv.AskInput) (*MessageResult, error) {
	build := func(s conv.State) (conv.Command, error) {
		m, err := e.assembled(ctx, conversationID, c.MessageID, s)
		if err != nil {
			return nil, err
		}
		c.Known = conv.StreamLookups{Message: m}
		if parley.ValidID(c.Request.RequestID) {
			c.IDTaken, err = e.store.IDTaken(ctx, conversationID, conv.InputName(c.Request.RequestID))
		}
		return c, err
	}
	d, _, err := e.decide(ctx, conversationID, build, nil)
	if err != nil {
		return nil, err
	}
	return &MessageResult{Message: d.Result.Message, Seq: d.Result.Seq, Turn: d.Result.Turn}, nil
}

// AnswerInput answers a pending input request. The same answer again
// returns the first one's result and writes nothing.
func (e *Engine) AnswerInput(ctx context.Context, conversationID string, c conv.AnswerInput) (*InputResult, error) {
	var messageID string
	build := func(s conv.State) (conv.Command, error) {
		in, _, ok := s.InputOf(c.RequestID)
		messageID = in.MessageID
		if ok && in.Status == parley.InputStatusPending {
			m, err := e.assembled(ctx, conversationID, in.MessageID, s)
			if err != nil {
				return nil, err
			}
			c.Known = conv.StreamLookups{Message: m}
		}
		return c, nil
	}
	d, _, err := e.decide(ctx, conversationID, build, nil)
	if err != nil {
		return nil, err
	}
	return &InputResult{MessageID: messageID, Seq: d.Result.Seq, Message: d.Result.Message}, nil
}

// AckInput records that the asking runner has an input request's outcome.
func (e *Engine) AckInput(ctx context.Context, conversationID string, c conv.AckInput) (int64, error) {
	d, _, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) { return c, nil }, nil)
	if err != nil {
		return 0, err
	}
	return d.Result.Seq, nil
}

// WithdrawInput takes back a pending request of the actor's; it returns
// the seq of the event that ended it (of the earlier one, if it had ended).
func (e *Engine) WithdrawInput(ctx context.Context, conversationID string, c conv.WithdrawInput) (int64, error) {
	d, _, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) { return c, nil }, nil)
	if err != nil {
		return 0, err
	}
	return d.Result.Seq, nil
}

// scheduleInputExpiry arms the timer of the first pending input request
// to expire; c.mu must be held.
func (e *Engine) scheduleInputExpiry(c *conversation, id string) {
	next := c.state.NextInputExpiry()
	if c.inputTimer != nil {
		if next.Equal(c.inputAt) {
			return
		}
		c.inputTimer.Stop()
		c.inputTimer = nil
	}
	c.inputAt = next
	if next.IsZero() || c.state.Closed {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	wait := next.Sub(e.opts.Now()) + time.Millisecond
	c.inputTimer = time.AfterFunc(max(wait, time.Millisecond), func() { e.expireInputs(id) })
}

// expireInputs decides conv.ExpireInputs on a conversation whose input
// timer fired, and arms the timer again.
func (e *Engine) expireInputs(id string) {
	if !e.track() {
		return
	}
	defer e.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := e.decide(ctx, id, func(conv.State) (conv.Command, error) { return conv.ExpireInputs{}, nil }, nil)
	if err != nil && !errors.Is(err, context.Canceled) && parley.ErrorCode(err) != parley.ENOTFOUND && parley.ErrorCode(err) != parley.EUNAVAILABLE {
		e.opts.Logger.Warn("input request expiry failed", slog.String("conversation", id), slog.Any("err", err))
	}
	e.cache.withLoaded(id, func(c *conversation) {
		c.inputTimer, c.inputAt = nil, time.Time{} // it fired: arm it again for the next
		e.scheduleInputExpiry(c, id)
	})
}
