package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
)

// Prompt states (PromptStatus.State).
const (
	PromptStateQueued     = parley.PromptStateQueued     // waiting in the queue (WaitingOn says on what)
	PromptStateDispatched = parley.PromptStateDispatched // handed to a runner that has not written its answer yet
	PromptStateAnswering  = parley.PromptStateAnswering  // its runner writes its answer (MessageID)
	PromptStateCompleted  = parley.PromptStateCompleted  // answered
	PromptStateCanceled   = parley.PromptStateCanceled   // ended without an answer, or with an aborted one (Reason)
)

// PromptStatus is where a prompt stands (GET …/prompts/{pid}).
type PromptStatus = parley.PromptStatus

// MaxPromptWait is the longest one PromptWait request waits, as the
// server bounds it.
const MaxPromptWait = 60 * time.Second

// Prompt returns where a prompt stands: queued (and on what it waits),
// dispatched, answering, or how it ended. An unknown prompt (or one that
// ended before the last 16 that ended) is 404 not_found.
func (c *Client) Prompt(ctx context.Context, conversationID, promptID string) (*PromptStatus, error) {
	return call[PromptStatus](ctx, c, http.MethodGet, promptPath(conversationID, promptID, ""), nil)
}

// PromptWait is Prompt, but the server holds the request until the prompt
// ends or wait passes (at most MaxPromptWait), and then answers with its
// status as it is.
func (c *Client) PromptWait(ctx context.Context, conversationID, promptID string, wait time.Duration) (*PromptStatus, error) {
	wait = min(max(wait, 0), MaxPromptWait)
	return call[PromptStatus](ctx, c, http.MethodGet, promptPath(conversationID, promptID, fmt.Sprintf("?wait=%dms", wait.Milliseconds())), nil)
}

// WaitPrompt waits until a prompt ends, asking the server to hold each
// request up to MaxPromptWait, until ctx ends (give it a deadline to
// bound the wait). It returns the prompt's final status.
func (c *Client) WaitPrompt(ctx context.Context, conversationID, promptID string) (*PromptStatus, error) {
	for {
		st, err := c.PromptWait(ctx, conversationID, promptID, MaxPromptWait)
		if err != nil || st.Ended() {
			return st, err
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

// Answer is what AskAndWait returns: the prompt's final status and its
// answer (nil if it ended without one).
type Answer struct {
	Status  *PromptStatus
	Message *parley.Message
}

// AskAndWait queues a prompt, waits until it ends (see WaitPrompt; give
// ctx a deadline), and returns its answer: the runner's message, whose
// Status says whether it completed, ended in an error or was canceled.
// A prompt canceled without an answer (withdrawn, stopped before the
// runner wrote) returns an Answer with no Message.
//
// Give p.ID (or p.ClientRequestID) to make a retry after a lost answer
// safe.
func (c *Client) AskAndWait(ctx context.Context, conversationID string, p NewPrompt) (*Answer, error) {
	q, err := c.QueuePrompt(ctx, conversationID, p)
	if err != nil {
		return nil, err
	}
	st, err := c.WaitPrompt(ctx, conversationID, q.ID)
	if err != nil {
		return nil, err
	}
	a := &Answer{Status: st}
	if st.MessageID != "" {
		if a.Message, err = c.Message(ctx, conversationID, st.MessageID); err != nil {
			return nil, err
		}
	}
	return a, nil
}
