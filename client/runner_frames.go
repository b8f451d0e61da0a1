package client

// What a runner writes: one method per runner frame (message.create, its
// deltas and tool updates, finalize, error, aborted, complete, reverted,
// message.state), each sent on the runner's connection and answered by
// the server's ack or error (see Runner.do).

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley"
)

// State returns the message messageID as the server holds it, with the text
// of every durable delta (message.state). A runner that reconnects after
// losing its connection (or the server) asks it before going on: whether
// its message.create was durable (ENOTFOUND if not), how much text and
// which tool calls the server has, whether its finalize landed.
func (r *Runner) State(ctx context.Context, messageID string) (*parley.Message, error) {
	return r.stateOn(ctx, r.current(), messageID)
}

func (r *Runner) stateOn(ctx context.Context, c *runnerConn, messageID string) (*parley.Message, error) {
	reply, err := r.exchange(ctx, c, map[string]any{"type": "message.state", "turnId": messageID})
	if err != nil {
		return nil, err
	}
	if reply.Message == nil {
		return nil, fmt.Errorf("message.state of %s: the ack has no message", messageID)
	}
	return reply.Message, nil
}

// Create starts the assistant message with id messageID (empty replyTo: it
// answers the prompt the runner was given). The message frames send the
// message's id as their turnId, its name on the wire.
func (r *Runner) Create(ctx context.Context, messageID string) (int64, error) {
	return r.do(ctx, createFrame(messageID, CreateOptions{}))
}

// CreateOptions are what a message.create may say besides the message's id.
type CreateOptions struct {
	// ReplyTo is the message the response answers (empty: the prompt the
	// runner was given).
	ReplyTo string
	// RetryOf names the failed message this one retries (a failover: see
	// Failover).
	RetryOf string
	// Channel is where the response goes outside Parley (its channel
	// webhook gets it once it is complete). A reply goes only to the
	// channel of the prompt it answers, which the server gives it when
	// this is empty; naming another is refused (forbidden).
	Channel *parley.Channel
	// OpenCodeSessionID records the OpenCode session that wrote the
	// response, in its metadata.
	OpenCodeSessionID string
}

// CreateWith starts the assistant message with id messageID, as o says.
func (r *Runner) CreateWith(ctx context.Context, messageID string, o CreateOptions) (int64, error) {
	return r.do(ctx, createFrame(messageID, o))
}

func createFrame(messageID string, o CreateOptions) map[string]any {
	f := map[string]any{"type": "message.create", "turnId": messageID, "replyTo": o.ReplyTo, "retryOf": o.RetryOf, "opencodeSessionId": o.OpenCodeSessionID}
	if o.Channel != nil {
		f["channelType"], f["channelId"] = o.Channel.Type, o.Channel.ID
	}
	return omitEmptyStrings(f)
}

// Text appends a text delta.
func (r *Runner) Text(ctx context.Context, messageID, delta string) (int64, error) {
	return r.do(ctx, textFrame(messageID, delta))
}

// TextAsync sends a text delta without waiting for its answer: Wait on
// what it returns. Frames go out in the order of the calls, and the server
// applies them in that order, committing the deltas that come while a
// commit is under way together; so a runner that keeps several deltas in
// flight streams several times faster than one that waits for each. ctx
// bounds the sending only.
func (r *Runner) TextAsync(ctx context.Context, messageID, delta string) (*Pending, error) {
	c := r.current()
	reply, err := r.post(ctx, c, textFrame(messageID, delta))
	if err != nil {
		return nil, err
	}
	return &Pending{c: c, reply: reply}, nil
}

func textFrame(messageID, delta string) map[string]any {
	return map[string]any{"type": "message.part.text-delta", "turnId": messageID, "delta": delta}
}

// Tool adds or updates a tool call.
func (r *Runner) Tool(ctx context.Context, messageID string, u ToolUpdate) (int64, error) {
	return r.do(ctx, toolFrame(messageID, u))
}

func toolFrame(messageID string, u ToolUpdate) map[string]any {
	f := map[string]any{"type": "message.part.tool-update", "turnId": messageID, "callId": u.CallID, "toolName": u.ToolName, "status": u.Status}
	if u.Args != nil {
		f["args"] = u.Args
	}
	if u.Result != nil {
		f["result"] = u.Result
	}
	if u.Error != "" {
		f["error"] = u.Error
	}
	return f
}

// Finalize ends the message with a reason (end_turn, error, canceled).
func (r *Runner) Finalize(ctx context.Context, messageID, reason, finalText string) (int64, error) {
	return r.do(ctx, finalizeFrame(messageID, FinalizeOptions{Reason: reason, FinalText: finalText}))
}

// FinalizeOptions are what a message.finalize may say.
type FinalizeOptions struct {
	// Reason is parley.FinishEndTurn (default), FinishError or
	// FinishCanceled (which also ends the prompt the message answers).
	Reason string
	// FinalText is the whole answer, for a runner that streamed only part
	// of it: it must start with the text streamed, and what it has past
	// that is added as text (content is always the text of the parts).
	// Another text is refused (invalid_value).
	FinalText string
	// Finality is what the finalize closes: empty or parley.FinalityTurn,
	// the runner's turn; parley.FinalityNone, nothing, so that another
	// message of the runner follows in the same turn;
	// parley.FinalityConversation, the whole conversation.
	Finality parley.Finality
}

// FinalizeWith ends the message messageID as o says.
func (r *Runner) FinalizeWith(ctx context.Context, messageID string, o FinalizeOptions) (int64, error) {
	return r.do(ctx, finalizeFrame(messageID, o))
}

func finalizeFrame(messageID string, o FinalizeOptions) map[string]any {
	if o.Reason == "" {
		o.Reason = parley.FinishEndTurn
	}
	return omitEmptyStrings(map[string]any{"type": "message.finalize", "turnId": messageID, "reason": o.Reason, "finalText": o.FinalText, "finality": string(o.Finality)})
}

// Fail ends the message with an error part (the runner's "error" frame):
// its status becomes error. With messageID empty, the message the runner
// created last on this connection.
func (r *Runner) Fail(ctx context.Context, messageID, message string) (int64, error) {
	return r.do(ctx, omitEmptyStrings(map[string]any{"type": "error", "turnId": messageID, "error": message}))
}

// Failover ends the message messageID with an error part, as Fail does, but
// leaves the runner's turn open and its prompt with it: the retry that
// follows (CreateWith with RetryOf naming messageID) continues the same turn.
func (r *Runner) Failover(ctx context.Context, messageID, message string) (int64, error) {
	return r.do(ctx, map[string]any{"type": "error", "turnId": messageID, "error": message, "finality": parley.FinalityNone})
}

// Reverted reports that the runner reverted messages on its side: the
// earliest of them and every message after it are removed.
func (r *Runner) Reverted(ctx context.Context, messageIDs ...string) (int64, error) {
	return r.do(ctx, map[string]any{"type": "reverted", "messageIds": messageIDs})
}

// Aborted answers an abort: the runner stopped its response. Its current
// message (the one it created last on this connection) ends canceled, and
// the prompt it was answering (the last one Next returned) ends: nothing
// more needs to be sent.
func (r *Runner) Aborted(ctx context.Context) (int64, error) {
	return r.do(ctx, omitEmptyStrings(map[string]any{"type": "aborted", "messageId": r.answering()}))
}

// Complete reports that the runner finished answering the prompt Next
// returned last. The frame names that prompt, so the server ends exactly
// it, never one dispatched after it.
func (r *Runner) Complete(ctx context.Context) (int64, error) {
	return r.do(ctx, omitEmptyStrings(map[string]any{"type": "complete", "messageId": r.answering()}))
}

// answering is the id of the last prompt Next returned (in the runner's
// conversation, on a view In made).
func (r *Runner) answering() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prompts[r.scope]
}

// omitEmptyStrings drops the fields whose value is "".
func omitEmptyStrings(f map[string]any) map[string]any {
	for k, v := range f {
		if v == "" {
			delete(f, k)
		}
	}
	return f
}
