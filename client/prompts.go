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
type NewPrompt struct {
	// ID is the prompt's id, which its user message takes (default: the
	// server makes one).
	ID string `json:"id,omitempty"`
	// AgentID asks as that agent (needed only with an admin token or an
	// open server).
	AgentID string `json:"agentId,omitempty"`
	Content string `json:"content"`
	// Mode is ModeFollowup (default), ModeSteer, ModeCollect or ModeReject.
	Mode string `json:"mode,omitempty"`
	// To names the agent whose runner should answer (default: any).
	To string `json:"to,omitempty"`
	// Channel is where the prompt came from; the answer goes back there
	// (through the server's channel webhook). Only an admin token may set
	// it: a channel's bridge posts its prompts.
	Channel *parley.Channel `json:"channel,omitempty"`
	// ClientRequestID makes a retry safe: the same key and body queue the
	// prompt once, and the retry gets the first answer.
	ClientRequestID string `json:"clientRequestId,omitempty"`
}

// QueuedPrompt is a prompt in a conversation's queue, waiting or being
// answered. Its text is in its prompt.queued events (Parts are their seqs).
type QueuedPrompt struct {
	ID      string          `json:"id"`
	Mode    string          `json:"mode"`
	AgentID string          `json:"agentId"`
	To      string          `json:"to,omitempty"`
	Channel *parley.Channel `json:"channel,omitempty"`
	// Parts are the seqs of the prompt.queued events that hold its text (a
	// collect prompt has one per prompt merged into it).
	Parts []int64 `json:"parts"`
	// Until is when a collect prompt stops collecting.
	Until parley.Time `json:"until"`
	// Runner is the agent it was dispatched to; empty while it waits.
	Runner string `json:"runner,omitempty"`
	// Written is true once its user message exists.
	Written bool `json:"written,omitempty"`
	// TurnID is the exchange its message starts: a task run's id, or empty
	// for the prompt's own id.
	TurnID string `json:"turnId,omitempty"`
	// Bytes is the length of its text.
	Bytes int `json:"bytes,omitempty"`
	// Aborted is true once its answer was aborted; it ends when its runner
	// answers or leaves.
	Aborted bool `json:"aborted,omitempty"`
	// WaitingOn says what a waiting prompt waits for; nil on the prompt
	// being answered and on one about to be dispatched.
	WaitingOn *WaitingOn `json:"waitingOn,omitempty"`
}

// WaitingOn is what a waiting prompt waits for.
type WaitingOn struct {
	// Reason is "turn" (another agent's open turn), "claim" (another
	// agent's claim on the next turn), "prompt" (the prompt being
	// answered), "queue" (a prompt ahead of it), "runner" (a runner of the
	// agent it is for, or of any agent) or "collect" (a collect window).
	Reason string `json:"reason"`
	// AgentID holds what it waits for: the turn's owner, the claim's
	// holder, the runner answering, the agent a runner is wanted of.
	AgentID string `json:"agentId,omitempty"`
	// Turn and TurnID name the open or claimed turn.
	Turn   int    `json:"turn,omitempty"`
	TurnID string `json:"turnId,omitempty"`
	// PromptID is the prompt being answered, ahead of it, or collecting.
	PromptID string `json:"promptId,omitempty"`
	// Until is when what it waits for ends at the latest, if known: the
	// turn's lease, the claim, the collect window.
	Until *parley.Time `json:"until,omitempty"`
}

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
	return call[TurnResult](ctx, c, http.MethodDelete, promptPath(conversationID, promptID, ""), omitEmpty(map[string]any{"agentId": agentID}))
}

// PromotePrompt moves a waiting prompt to the front of the queue.
func (c *Client) PromotePrompt(ctx context.Context, conversationID, promptID, agentID string) (*TurnResult, error) {
	return call[TurnResult](ctx, c, http.MethodPost, promptPath(conversationID, promptID, "/promote"), omitEmpty(map[string]any{"agentId": agentID}))
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
	return call[Stopped](ctx, c, http.MethodPost, convPath(conversationID, "/abort"), map[string]any{"promptId": promptID})
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
func (c *Client) Revert(ctx context.Context, conversationID, messageID, agentID string) (*RevertResult, error) {
	body := omitEmpty(map[string]any{"messageId": messageID, "agentId": agentID})
	return call[RevertResult](ctx, c, http.MethodPost, convPath(conversationID, "/revert"), body)
}
