package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
)

// Runner is an agent's connection to a conversation's runner endpoint,
// GET /v1/conversations/{id}/runner, over which it streams its answers with
// the runner protocol (its frames are in docs/api.md, "Runners"). Next
// yields what the server sends (prompts, aborts, reverts); the other methods
// send one frame each and return once the server acknowledged it as
// durable, or with the server's error.
type Runner struct {
	conn    *websocket.Conn
	pushes  chan Push
	replies chan runnerReply
	send    sync.Mutex // one frame awaits its reply at a time
	done    chan struct{}
	err     error

	mu     sync.Mutex
	prompt string // the last prompt Next returned
}

// Push is a frame the server sends a runner: Type is "prompt", "abort" or
// "revert"; MessageID names the prompt's message or the message concerned.
type Push struct {
	Type          string          `json:"type"`
	MessageID     string          `json:"messageId"`
	Content       string          `json:"content,omitempty"`
	MessageFormat string          `json:"messageFormat,omitempty"`
	AgentID       string          `json:"agentId,omitempty"`
	Channel       *parley.Channel `json:"channel,omitempty"`
}

// ToolUpdate is one status change of a tool call.
type ToolUpdate struct {
	CallID   string          `json:"callId"`
	ToolName string          `json:"toolName"`
	Status   string          `json:"status"`
	Args     json.RawMessage `json:"args,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// ConnectRunner opens the runner connection of a conversation. agentID is
// needed only with an admin token (or an open server); an agent token names
// its agent.
func (c *Client) ConnectRunner(ctx context.Context, conversationID, agentID string) (*Runner, error) {
	u := strings.Replace(c.baseURL, "http", "ws", 1) + convPath(conversationID, "/runner")
	if agentID != "" {
		u += "?agentId=" + url.QueryEscape(agentID)
	}
	conn, err := c.dialWS(ctx, u)
	if err != nil {
		return nil, err
	}
	r := &Runner{conn: conn, pushes: make(chan Push, maxPushes), replies: make(chan runnerReply, 1), done: make(chan struct{})}
	go r.read()
	return r, nil
}

// maxPushes bounds the prompts, aborts and reverts that wait for Next. A
// runner that leaves more unread is closed: reading replies must never wait
// for it.
const maxPushes = 1024

func (r *Runner) read() {
	defer close(r.done)
	for {
		_, data, err := r.conn.Read(context.Background())
		if err != nil {
			r.err = err
			return
		}
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(data, &head)
		switch head.Type {
		case "ack", "error":
			var reply runnerReply
			if err := json.Unmarshal(data, &reply); err != nil {
				r.err = fmt.Errorf("bad reply from the server: %w", err)
				r.conn.CloseNow()
				return
			}
			r.replies <- reply
		default:
			var p Push
			if json.Unmarshal(data, &p) != nil {
				continue
			}
			select {
			case r.pushes <- p:
			default:
				r.err = fmt.Errorf("more than %d prompts, aborts and reverts were left unread (call Next)", maxPushes)
				r.conn.CloseNow()
				return
			}
		}
	}
}

// Next returns the next prompt, abort or revert from the server.
func (r *Runner) Next(ctx context.Context) (Push, error) {
	select {
	case p := <-r.pushes:
		if p.Type == "prompt" {
			r.mu.Lock()
			r.prompt = p.MessageID
			r.mu.Unlock()
		}
		return p, nil
	case <-r.done:
		return Push{}, fmt.Errorf("runner connection closed: %w", r.err)
	case <-ctx.Done():
		return Push{}, ctx.Err()
	}
}

// Close closes the connection; the server puts an unanswered prompt back
// in the queue.
func (r *Runner) Close() error { return r.conn.Close(websocket.StatusNormalClosure, "") }

// runnerReply is the server's answer to one frame: an ack or an error.
type runnerReply struct {
	Type    string          `json:"type"`
	Seq     int64           `json:"seq"`
	Message *parley.Message `json:"message"`
	Error   *parley.Error   `json:"error"`
}

// do sends one frame and waits for its ack; it returns the acked seq.
func (r *Runner) do(ctx context.Context, frame map[string]any) (int64, error) {
	reply, err := r.exchange(ctx, frame)
	if err != nil {
		return 0, err
	}
	return reply.Seq, nil
}

// exchange sends one frame and waits for its reply. Replies come in the
// order of the frames, so if ctx ends first the connection is closed: the
// late reply must not be taken for the next frame's. Whether that frame
// was applied is then unknown; a new connection's State tells.
func (r *Runner) exchange(ctx context.Context, frame map[string]any) (*runnerReply, error) {
	r.send.Lock()
	defer r.send.Unlock()
	b, _ := json.Marshal(frame)
	if err := r.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, err
	}
	select {
	case reply := <-r.replies:
		if reply.Type == "error" {
			if reply.Error == nil {
				reply.Error = &parley.Error{Code: parley.EINTERNAL, Message: "an error frame without an error"}
			}
			return nil, reply.Error
		}
		return &reply, nil
	case <-r.done:
		return nil, fmt.Errorf("runner connection closed: %w", r.err)
	case <-ctx.Done():
		r.conn.CloseNow()
		return nil, ctx.Err()
	}
}

// State returns the message turnID as the server holds it, with the text
// of every durable delta (message.state). A runner that reconnects after
// losing its connection (or the server) asks it before going on: whether
// its message.create was durable (ENOTFOUND if not), how much text and
// which tool calls the server has, whether its finalize landed.
func (r *Runner) State(ctx context.Context, turnID string) (*parley.Message, error) {
	reply, err := r.exchange(ctx, map[string]any{"type": "message.state", "turnId": turnID})
	if err != nil {
		return nil, err
	}
	if reply.Message == nil {
		return nil, fmt.Errorf("message.state of %s: the ack has no message", turnID)
	}
	return reply.Message, nil
}

// Create starts the assistant message with id turnID (empty replyTo: it
// answers the prompt the runner was given).
func (r *Runner) Create(ctx context.Context, turnID string) (int64, error) {
	return r.do(ctx, map[string]any{"type": "message.create", "turnId": turnID})
}

// CreateOptions are what a message.create may say besides the message's id.
type CreateOptions struct {
	// ReplyTo is the message the response answers (empty: the prompt the
	// runner was given).
	ReplyTo string
	// RetryOf names the failed message this one retries (a failover: see
	// Failover).
	RetryOf string
}

// CreateWith starts the assistant message with id turnID, as o says.
func (r *Runner) CreateWith(ctx context.Context, turnID string, o CreateOptions) (int64, error) {
	return r.do(ctx, omitEmptyStrings(map[string]any{"type": "message.create", "turnId": turnID, "replyTo": o.ReplyTo, "retryOf": o.RetryOf}))
}

// Text appends a text delta.
func (r *Runner) Text(ctx context.Context, turnID, delta string) (int64, error) {
	return r.do(ctx, map[string]any{"type": "message.part.text-delta", "turnId": turnID, "delta": delta})
}

// Tool adds or updates a tool call.
func (r *Runner) Tool(ctx context.Context, turnID string, u ToolUpdate) (int64, error) {
	f := map[string]any{"type": "message.part.tool-update", "turnId": turnID, "callId": u.CallID, "toolName": u.ToolName, "status": u.Status}
	if u.Args != nil {
		f["args"] = u.Args
	}
	if u.Result != nil {
		f["result"] = u.Result
	}
	if u.Error != "" {
		f["error"] = u.Error
	}
	return r.do(ctx, f)
}

// Finalize ends the message with a reason (end_turn, error, canceled).
func (r *Runner) Finalize(ctx context.Context, turnID, reason, finalText string) (int64, error) {
	f := map[string]any{"type": "message.finalize", "turnId": turnID, "reason": reason}
	if finalText != "" {
		f["finalText"] = finalText
	}
	return r.do(ctx, f)
}

// Fail ends the message with an error part (the runner's "error" frame):
// its status becomes error. With turnID empty, the message the runner
// created last on this connection.
func (r *Runner) Fail(ctx context.Context, turnID, message string) (int64, error) {
	return r.do(ctx, omitEmptyStrings(map[string]any{"type": "error", "turnId": turnID, "error": message}))
}

// Failover ends the message turnID with an error part, as Fail does, but
// leaves the runner's turn open and its prompt with it: the retry that
// follows (CreateWith with RetryOf naming turnID) continues the same turn.
func (r *Runner) Failover(ctx context.Context, turnID, message string) (int64, error) {
	return r.do(ctx, map[string]any{"type": "error", "turnId": turnID, "error": message, "finality": parley.FinalityNone})
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

// answering is the id of the last prompt Next returned.
func (r *Runner) answering() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prompt
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
