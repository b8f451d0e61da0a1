package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
)

// Runner is an agent's connection to a runner endpoint, over which it
// streams its answers with the runner protocol (its frames are in
// docs/api.md, "Runners"): a conversation's own, GET
// /v1/conversations/{id}/runner (ConnectRunner), or the agent's for every
// conversation it takes part in, GET /v1/agents/{agentId}/runner
// (ConnectAgentRunner). Serve answers every prompt with a Handler,
// reconnecting by itself; or drive it by hand: Next yields what the server
// sends (prompts, aborts, reverts), and the other methods send one frame
// each and return once the server acknowledged it as durable, or with the
// server's error (a *StatusError with Status 0). On an agent-wide runner,
// send them through In, which names the conversation. Reconnect replaces a
// lost connection.
type Runner struct {
	*link
	conversationID string
	// scope is the conversation every frame names (conversationId): set on
	// the views In makes of an agent-wide runner, empty on a
	// conversation's own runner, whose frames need not name it.
	scope string
}

// link is what a Runner and the views In makes of it share: the
// connection and what it was told.
type link struct {
	c    *Client
	url  string
	wide bool // an agent-wide runner: every frame names its conversation

	send sync.Mutex // frames are written, and their replies queued, in one order
	dial sync.Mutex // one reconnect at a time

	mu      sync.Mutex
	conn    *runnerConn       // the current connection
	closed  bool              // Close was called: no more reconnects
	prompts map[string]string // the last prompt Next returned, by conversation ("" on a conversation's own runner)
	inputs  inputs            // the input requests waited on, and the outcomes handed over
	shut    chan struct{}     // closed by Close
}

// runnerConn is one WebSocket of a Runner, with the goroutine that reads it.
type runnerConn struct {
	ws     *websocket.Conn
	pushes chan Push
	done   chan struct{}
	err    error        // why it ended; set before done closes
	fatal  *StatusError // an error frame that ends the connection for good

	mu      sync.Mutex
	waiting []chan runnerReply // one per frame written and not yet answered, in order
}

// Push is a frame the server sends a runner: Type is "prompt", "abort" or
// "revert". PromptID names the prompt a "prompt" or "abort" frame is
// about (the id of the prompt's user message, which the answer replies
// to); MessageID names the message a "revert" frame reverts. Both are the
// frame's messageId on the wire. On an agent-wide runner Type may also be
// "error": the runner's work in ConversationID has ended (the
// conversation was deleted), and Error says why.
//
// The input requests the runner asked come as pushes only when no
// AskApproval or AskQuestion of this runner waits for them (they were
// asked before a restart, or the call's ctx ended): "input.answered" with
// Answered, the outcome (ack it with AckInput once handled: until then the
// server sends it again on every reconnect), and "input.pending" with
// Request, a request still unanswered, sent when the runner connects. For
// both, MessageID is the message that asked.
type Push struct {
	Type          string
	PromptID      string
	MessageID     string
	Content       string
	MessageFormat string
	AgentID       string
	Channel       *parley.Channel
	// ConversationID names the conversation the frame is about: on an
	// agent-wide runner, always; a conversation's own runner leaves it out
	// (it is the runner's).
	ConversationID string
	Error          *parley.Error
	// Answered is the outcome of an "input.answered" push.
	Answered *parley.InputAnswered
	// Request is the request of an "input.pending" push.
	Request *parley.Input
}

// pushFrame is a Push as the wire has it.
type pushFrame struct {
	Type           string          `json:"type"`
	MessageID      string          `json:"messageId"`
	Content        string          `json:"content,omitempty"`
	MessageFormat  string          `json:"messageFormat,omitempty"`
	AgentID        string          `json:"agentId,omitempty"`
	Channel        *parley.Channel `json:"channel,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	Error          *parley.Error   `json:"error,omitempty"`
}

// namesMessage reports whether a frame's messageId names a message
// rather than a prompt.
func namesMessage(typ string) bool { return typ == "revert" || isInputFrame(typ) }

// UnmarshalJSON implements json.Unmarshaler: messageId becomes PromptID or
// MessageID as the frame's type says.
func (p *Push) UnmarshalJSON(b []byte) error {
	var f pushFrame
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*p = Push{Type: f.Type, Content: f.Content, MessageFormat: f.MessageFormat, AgentID: f.AgentID, Channel: f.Channel, ConversationID: f.ConversationID, Error: f.Error}
	if namesMessage(f.Type) {
		p.MessageID = f.MessageID
	} else {
		p.PromptID = f.MessageID
	}
	return nil
}

// MarshalJSON implements json.Marshaler: the frame as the server sends it.
func (p Push) MarshalJSON() ([]byte, error) {
	id := p.PromptID
	if namesMessage(p.Type) {
		id = p.MessageID
	}
	return json.Marshal(pushFrame{Type: p.Type, MessageID: id, Content: p.Content, MessageFormat: p.MessageFormat, AgentID: p.AgentID,
		Channel: p.Channel, ConversationID: p.ConversationID, Error: p.Error})
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
// its agent. A refused handshake is a *StatusError with the HTTP status.
func (c *Client) ConnectRunner(ctx context.Context, conversationID, agentID string) (*Runner, error) {
	u := strings.Replace(c.baseURL, "http", "ws", 1) + convPath(conversationID, "/runner")
	if agentID != "" {
		u += "?agentId=" + url.QueryEscape(agentID)
	}
	return connectRunner(ctx, &link{c: c, url: u}, conversationID)
}

// ConnectAgentRunner opens the runner connection of agent agentID for
// every conversation it takes part in (GET /v1/agents/{agentId}/runner):
// the prompts of all of them come over this one connection, each naming
// its conversation. Serve answers them, one at a time in each
// conversation and the conversations side by side. The token must be the
// agent's, or an admin's (a 403 *StatusError otherwise).
func (c *Client) ConnectAgentRunner(ctx context.Context, agentID string) (*Runner, error) {
	u := strings.Replace(c.baseURL, "http", "ws", 1) + "/v1/agents/" + url.PathEscape(agentID) + "/runner"
	return connectRunner(ctx, &link{c: c, url: u, wide: true}, "")
}

func connectRunner(ctx context.Context, l *link, conversationID string) (*Runner, error) {
	l.prompts, l.shut = map[string]string{}, make(chan struct{})
	l.inputs = inputs{waiting: map[string]chan parley.InputAnswered{}, delivered: map[string]bool{}}
	r := &Runner{link: l, conversationID: conversationID}
	conn, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	r.conn = conn
	return r, nil
}

// In returns the runner as it works in one conversation: on an
// agent-wide runner, its frames name that conversation (conversationId).
// It shares the runner's connection: Next, Close and Reconnect act on the
// whole runner. On a conversation's own runner, In of its conversation is
// the runner itself.
func (r *Runner) In(conversationID string) *Runner {
	if !r.wide {
		return r
	}
	return &Runner{link: r.link, conversationID: conversationID, scope: conversationID}
}

// maxPushes bounds the prompts, aborts and reverts that wait for Next. A
// runner that leaves more unread is closed: reading replies must never wait
// for it.
const maxPushes = 1024

// open dials the endpoint and starts reading the new connection.
func (r *Runner) open(ctx context.Context) (*runnerConn, error) {
	ws, err := r.c.dialWS(ctx, r.url)
	if err != nil {
		return nil, err
	}
	c := &runnerConn{ws: ws, pushes: make(chan Push, maxPushes), done: make(chan struct{})}
	go c.read(r.link)
	return c, nil
}

func (c *runnerConn) read(l *link) {
	wide := l.wide
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			if c.fatal == nil {
				c.fatal = closeStatusError(err)
			}
			if c.fatal != nil {
				err = c.fatal // the error frame says why better than the close
			}
			c.err = err
			return
		}
		var head struct {
			Type           string  `json:"type"`
			TurnID         *string `json:"turnId"`
			ConversationID string  `json:"conversationId"`
		}
		_ = json.Unmarshal(data, &head)
		switch {
		case head.Type == "error" && head.TurnID == nil && (!wide || head.ConversationID == ""):
			// Not a reply: the server ends the connection (the conversation
			// was deleted, the token revoked) and says why first.
			c.fatal = frameError(data)
		case head.Type == "ack" || head.Type == "error" && head.TurnID != nil:
			var reply runnerReply
			if err := json.Unmarshal(data, &reply); err != nil {
				c.err = fmt.Errorf("bad reply from the server: %w", err)
				c.ws.CloseNow()
				return
			}
			c.mu.Lock()
			if len(c.waiting) == 0 {
				c.mu.Unlock()
				c.err = errors.New("the server answered a frame that was not sent")
				c.ws.CloseNow()
				return
			}
			w := c.waiting[0]
			c.waiting = c.waiting[1:]
			c.mu.Unlock()
			w <- reply // buffered: its caller may have gone
		default:
			var p Push
			if isInputFrame(head.Type) {
				var ok bool
				if p, ok = l.input(c, data); !ok {
					continue // handed to the call that waits for it
				}
			} else if json.Unmarshal(data, &p) != nil {
				continue
			}
			select {
			case c.pushes <- p:
			default:
				c.err = fmt.Errorf("more than %d prompts, aborts and reverts were left unread (call Next)", maxPushes)
				c.ws.CloseNow()
				return
			}
		}
	}
}

// closedErr is the error of a call on a connection that ended.
func (c *runnerConn) closedErr() error {
	if c.fatal != nil {
		return c.fatal
	}
	return fmt.Errorf("runner connection closed: %w", c.err)
}

// current returns the connection in use.
func (r *Runner) current() *runnerConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn
}

// ConversationID is the conversation the runner is attached to.
func (r *Runner) ConversationID() string { return r.conversationID }

// Next returns the next prompt, abort or revert from the server. Once the
// connection is lost it returns an error: call Reconnect to go on.
func (r *Runner) Next(ctx context.Context) (Push, error) {
	c := r.current()
	select {
	case p := <-c.pushes:
		if p.Type == "prompt" {
			r.mu.Lock()
			r.prompts[p.ConversationID] = p.PromptID
			if len(r.prompts) > maxPushes {
				clear(r.prompts) // bounded: an agent-wide runner's prompts of long ago
				r.prompts[p.ConversationID] = p.PromptID
			}
			r.mu.Unlock()
		}
		return p, nil
	case <-c.done:
		return Push{}, c.closedErr()
	case <-ctx.Done():
		return Push{}, ctx.Err()
	}
}

// Close closes the connection and ends Serve; the server puts an
// unanswered prompt back in the queue.
func (r *Runner) Close() error {
	r.mu.Lock()
	if !r.closed {
		close(r.shut) // ends the calls waiting for input
	}
	r.closed = true
	c := r.conn
	r.mu.Unlock()
	return c.ws.Close(websocket.StatusNormalClosure, "")
}

// ErrRunnerClosed is what Serve and Reconnect return after Close.
var ErrRunnerClosed = errors.New("client: the runner was closed")

// Reconnect replaces the runner's connection with a new one (closing the
// old one, if it still stands). A runner that lost its connection calls it
// and then asks State of the message it was writing, to learn whether its
// last frame was applied and go on from there; the server keeps an
// unfinished message for the runner's agent for its grace period (30s by
// default) and dispatches the prompt it was answering to it again. A
// refused handshake (the conversation deleted, the token revoked) is a
// *StatusError.
func (r *Runner) Reconnect(ctx context.Context) error {
	_, err := r.redial(ctx, r.current())
	return err
}

// redial replaces old with a new connection, unless another caller did
// already: it returns the connection to use.
func (r *Runner) redial(ctx context.Context, old *runnerConn) (*runnerConn, error) {
	r.dial.Lock()
	defer r.dial.Unlock()
	r.mu.Lock()
	cur, closed := r.conn, r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrRunnerClosed
	}
	if cur != old {
		return cur, nil // someone else reconnected meanwhile
	}
	old.ws.CloseNow()
	c, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.ws.CloseNow()
		return nil, ErrRunnerClosed
	}
	r.conn = c
	return c, nil
}

// runnerReply is the server's answer to one frame: an ack or an error.
type runnerReply struct {
	Type    string          `json:"type"`
	Seq     int64           `json:"seq"`
	Message *parley.Message `json:"message"`
	Error   *parley.Error   `json:"error"`
}

// do sends one frame and waits for its ack; it returns the acked seq.
func (r *Runner) do(ctx context.Context, frame map[string]any) (int64, error) {
	reply, err := r.exchange(ctx, r.current(), frame)
	if err != nil {
		return 0, err
	}
	return reply.Seq, nil
}

// exchange sends one frame on c (naming the runner's conversation, on an
// agent-wide runner) and waits for its reply. Frames of several callers
// are sent without waiting for each other's replies, which come in the
// order of the frames. If ctx ends first, the frame may or may not be
// applied (State tells), and its reply is dropped when it comes. A refused
// frame is a *StatusError with Status 0.
func (r *Runner) exchange(ctx context.Context, c *runnerConn, frame map[string]any) (*runnerReply, error) {
	reply, err := r.post(ctx, c, frame)
	if err != nil {
		return nil, err
	}
	return c.await(ctx, reply)
}

// frameWriteTimeout bounds one frame's write on the runner connection: a
// write stalled that long closes the connection (and the runner reconnects).
const frameWriteTimeout = 30 * time.Second

// post sends one frame on c and returns where its reply will come.
func (r *Runner) post(ctx context.Context, c *runnerConn, frame map[string]any) (chan runnerReply, error) {
	if r.scope != "" {
		frame["conversationId"] = r.scope
	}
	b, _ := json.Marshal(frame)
	reply := make(chan runnerReply, 1)
	r.send.Lock()
	select {
	case <-c.done:
		r.send.Unlock()
		return nil, c.closedErr()
	default:
	}
	if err := ctx.Err(); err != nil {
		r.send.Unlock()
		return nil, err
	}
	c.mu.Lock()
	c.waiting = append(c.waiting, reply)
	c.mu.Unlock()
	// The connection is shared by every call, and the websocket library
	// closes it when the context of a write ends: so the caller's ctx,
	// which may end the moment the frame is out, must not govern the
	// write; only a write that stalls for frameWriteTimeout cuts it.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frameWriteTimeout)
	err := c.ws.Write(wctx, websocket.MessageText, b)
	cancel()
	r.send.Unlock()
	if err != nil {
		c.ws.CloseNow() // its reply would be taken for the next frame's
		return nil, fmt.Errorf("runner connection: %w", err)
	}
	return reply, nil
}

// await waits for the reply of a frame posted on c.
func (c *runnerConn) await(ctx context.Context, reply chan runnerReply) (*runnerReply, error) {
	select {
	case reply := <-reply:
		return replyOf(reply)
	case <-c.done:
		select {
		case reply := <-reply: // it came before the connection ended
			return replyOf(reply)
		default:
		}
		return nil, c.closedErr()
	case <-ctx.Done():
		return nil, ctx.Err() // its reply, when it comes, is dropped
	}
}

// replyOf is what a reply says: the ack, or the server's error.
func replyOf(reply runnerReply) (*runnerReply, error) {
	if reply.Type == "error" {
		if reply.Error == nil {
			reply.Error = &parley.Error{Code: parley.EINTERNAL, Message: "an error frame without an error"}
		}
		return nil, &StatusError{Err: reply.Error}
	}
	return &reply, nil
}

// Pending is a frame sent without waiting for its answer (TextAsync).
type Pending struct {
	c     *runnerConn
	reply chan runnerReply
	done  bool // seq and err are the answer
	seq   int64
	err   error
}

// Wait waits for the frame's answer: the seq it was acknowledged with
// (deltas that reached the server while a commit was under way share one
// chunk event, and its seq), or why it was refused (a *StatusError) or
// lost (the connection ended: State tells whether it was applied). If ctx
// ends first, Wait returns ctx's error and may be called again.
func (p *Pending) Wait(ctx context.Context) (int64, error) {
	if !p.done {
		reply, err := p.c.await(ctx, p.reply)
		if err != nil && ctx.Err() != nil {
			return 0, err
		}
		p.done, p.err = true, err
		if err == nil {
			p.seq = reply.Seq
		}
	}
	return p.seq, p.err
}
