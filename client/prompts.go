package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley"
)

// Prompt modes (NewPrompt.Mode).
const (
	// ModeFollowup queues the prompt last (the default).
	ModeFollowup = "followup"
	// ModeSteer puts the prompt before every waiting one and aborts the
	// answer under way.
	ModeSteer = "steer"
	// ModeCollect merges prompts sent within 2s of each other into one.
	ModeCollect = "collect"
	// ModeReject refuses the prompt (409 busy) while any prompt waits or is
	// being answered.
	ModeReject = "reject"
)

// NewPrompt is the body of QueuePrompt.
type NewPrompt = parley.QueuePromptRequest

// QueuedPrompt is a prompt in a conversation's queue, waiting or being
// answered.
type QueuedPrompt = parley.QueuedPrompt

// WaitingOn is what a waiting prompt waits for.
type WaitingOn = parley.WaitingOn

// PromptResult is the answer to QueuePrompt.
type PromptResult struct {
	// ID is the prompt's id (and, once dispatched, its user message's).
	ID string `json:"id"`
	// Seq is the seq of its prompt.queued event.
	Seq int64 `json:"seq"`
	// Queue is the queue after it: the prompt being answered first, then
	// the waiting ones.
	Queue []QueuedPrompt `json:"queue"`
}

// QueuePrompt queues a prompt for the conversation's runners. A full queue
// is 409 busy (with queueLength and maxQueueLength in the error's
// Details); so is mode reject while the queue is not empty.
func (c *Client) QueuePrompt(ctx context.Context, conversationID string, p NewPrompt) (*PromptResult, error) {
	return call[PromptResult](ctx, c, http.MethodPost, convPath(conversationID, "/prompts"), p)
}

// Prompts returns a conversation's prompt queue: the prompt being answered
// first, then the waiting ones.
func (c *Client) Prompts(ctx context.Context, conversationID string) ([]QueuedPrompt, error) {
	r, err := call[struct {
		Prompts []QueuedPrompt `json:"prompts"`
	}](ctx, c, http.MethodGet, convPath(conversationID, "/prompts"), nil)
	if err != nil {
		return nil, err
	}
	return r.Prompts, nil
}

// WithdrawPrompt takes back a waiting prompt (prompt.canceled, reason
// withdrawn); one being answered is 409 busy: Stop it instead. agentID is
// needed only with an admin token or an open server.
func (c *Client) WithdrawPrompt(ctx context.Context, conversationID, promptID, agentID string) (*TurnResult, error) {
	return call[TurnResult](ctx, c, http.MethodDelete, promptPath(conversationID, promptID, ""), parley.PromptActionRequest{AgentID: agentID})
}

// PromotePrompt moves a waiting prompt to the front of the queue.
func (c *Client) PromotePrompt(ctx context.Context, conversationID, promptID, agentID string) (*TurnResult, error) {
	return call[TurnResult](ctx, c, http.MethodPost, promptPath(conversationID, promptID, "/promote"), parley.PromptActionRequest{AgentID: agentID})
}

func promptPath(conversationID, promptID, rest string) string {
	return convPath(conversationID, "/prompts/"+url.PathEscape(promptID)+rest)
}

// Stop aborts the answer to the prompt being answered (POST …/abort): the
// prompt is marked aborted and its runner told to stop (again, if it was
// already). It is 404 not_found when no prompt is being answered. It
// stops whatever answer is under way: StopPrompt stops only the one meant.
func (c *Client) Stop(ctx context.Context, conversationID string) error {
	return c.do(ctx, http.MethodPost, convPath(conversationID, "/abort"), nil, nil)
}

// Stopped is what a stop stopped: the prompt, and the message streaming
// its answer ("" if none).
type Stopped struct {
	Status    string `json:"status"`
	PromptID  string `json:"promptId"`
	MessageID string `json:"messageId"`
}

// StopPrompt stops the answer to prompt promptID only while it is being
// answered (POST …/abort {"promptId"}): a prompt that waits, has ended or
// is unknown is 409 not_answering (a *StatusError whose Details'
// "answering" names the prompt and message being answered now, or is
// nil), and nothing is stopped. Name the prompt you started: a Stop that
// names none stops whatever answer is under way. It returns what it
// stopped.
func (c *Client) StopPrompt(ctx context.Context, conversationID, promptID string) (*Stopped, error) {
	return call[Stopped](ctx, c, http.MethodPost, convPath(conversationID, "/abort"), parley.StopRequest{PromptID: promptID})
}

// RevertResult is the answer to Revert.
type RevertResult struct {
	// Removed are the ids of the messages removed, by seq (none for an
	// unknown id).
	Removed []string `json:"removed"`
	// Seq is the seq of the messages.removed event (0 if none).
	Seq int64 `json:"seq"`
}

// Revert removes a message and every message after it (one
// messages.removed event; the log keeps everything), and tells the
// runners. agentID is needed only with an admin token or an open server.
// An id no message of the conversation ever had is a *StatusError 404
// (parley.ENOTFOUND); one reverted before removes nothing.
func (c *Client) Revert(ctx context.Context, conversationID, messageID, agentID string) (*RevertResult, error) {
	body := parley.RevertRequest{AgentID: agentID, MessageID: messageID}
	return call[RevertResult](ctx, c, http.MethodPost, convPath(conversationID, "/revert"), body)
}
