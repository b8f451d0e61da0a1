// Package client is the Go SDK for Parley's HTTP API, live streams and
// runners. It imports no server package: only the domain types of package
// parley.
//
//	c := client.New("http://127.0.0.1:7700", os.Getenv("PARLEY_TOKEN"))
//	res, err := c.PostMessage(ctx, convID, client.Message{Role: "user", Content: "hello"})
//	for m, err := range c.EachMessage(ctx, convID, client.ListMessagesOptions{}) { … }
//	for f, err := range c.Subscribe(ctx, convID, client.SubscribeOptions{}).Frames(ctx) { d, _ := f.Decode(); … }
//	r, err := c.ConnectRunner(ctx, convID, "bot")
//	err = r.Serve(ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error { return rp.Text(ctx, "hi") }))
//
// Every call the server refuses returns a *StatusError. docs/sdk-go.md
// shows each part in a few lines.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/parleyhq/parley"
)

// Client talks to one Parley server. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:7700)
// that sends token as its bearer token (none if empty).
func New(baseURL, token string) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{}}
}

// WithHTTPClient returns a copy of c that uses hc for requests.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	cp := *c
	cp.http = hc
	return &cp
}

// View is a conversation with its head and guidance.
type View struct {
	Conversation parley.Conversation `json:"conversation"`
	Head         parley.Head         `json:"head"`
	Guidance     *parley.Guidance    `json:"guidance"`
}

// NewConversation is the body of CreateConversation.
type NewConversation = parley.CreateConversationRequest

// Precondition is a turn precondition {expectTurn, startingTurn}.
type Precondition = parley.Precondition

// Message is the body of PostMessage. Give Content or Parts.
type Message = parley.PostMessageRequest

// MessageResult is the answer to PostMessage.
type MessageResult struct {
	Message *parley.Message `json:"message"`
	Seq     int64           `json:"seq"`
	Turn    int             `json:"turn"`
}

// TurnResult is the answer to the turn commands.
type TurnResult struct {
	Turn     int              `json:"turn"`
	WasReset bool             `json:"wasReset"`
	Claimed  bool             `json:"claimed"`
	Claim    *parley.Claim    `json:"claim,omitempty"`
	Seq      int64            `json:"seq"`
	Written  bool             `json:"written"`
	Head     parley.Head      `json:"head"`
	Guidance *parley.Guidance `json:"guidance"`
}

// CreateConversation creates a conversation.
func (c *Client) CreateConversation(ctx context.Context, nc NewConversation) (*View, error) {
	return call[View](ctx, c, http.MethodPost, "/v1/conversations", nc)
}

// Conversation returns a conversation's view.
func (c *Client) Conversation(ctx context.Context, id string) (*View, error) {
	return call[View](ctx, c, http.MethodGet, "/v1/conversations/"+url.PathEscape(id), nil)
}

// UpdateConversation changes a conversation's title, metadata (a JSON
// merge patch: a key set to null is removed), participants or members,
// and returns its view as Conversation does. Only the agent that created
// it, or an admin, may; a patch that changes nothing writes nothing.
// Subscribers see a conversation.updated event (Fold applies it). An
// agent removed loses access: its streams of the conversation end.
func (c *Client) UpdateConversation(ctx context.Context, id string, patch parley.ConversationPatch) (*View, error) {
	return call[View](ctx, c, http.MethodPatch, "/v1/conversations/"+url.PathEscape(id), patch)
}

// DeleteConversation removes a conversation with everything in it; its
// live streams and runner connections end with a not_found error. It needs
// an admin token.
func (c *Client) DeleteConversation(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/conversations/"+url.PathEscape(id), nil, nil)
}

// PostMessage writes a message.
func (c *Client) PostMessage(ctx context.Context, conversationID string, m Message) (*MessageResult, error) {
	return call[MessageResult](ctx, c, http.MethodPost, convPath(conversationID, "/messages"), m)
}

// Claim claims the next turn for agentID (empty: the token's agent).
func (c *Client) Claim(ctx context.Context, conversationID, agentID string, expectTurn int) (*TurnResult, error) {
	body := parley.ClaimTurnRequest{AgentID: agentID, ExpectTurn: expectTurn}
	return call[TurnResult](ctx, c, http.MethodPost, convPath(conversationID, "/turns/claim"), body)
}

// Reset resets the agent's open turn; with claim, claims the next turn otherwise.
func (c *Client) Reset(ctx context.Context, conversationID, agentID string, claim bool) (*TurnResult, error) {
	body := parley.ResetTurnRequest{AgentID: agentID, Claim: claim}
	return call[TurnResult](ctx, c, http.MethodPost, convPath(conversationID, "/turns/reset"), body)
}

// AbortTurn gives up the agent's open turn (POST …/turns/abort): a
// turn.aborted tombstone. To stop an answer being streamed, use Stop.
func (c *Client) AbortTurn(ctx context.Context, conversationID, agentID, reason string) (*TurnResult, error) {
	body := parley.AbortTurnRequest{AgentID: agentID, Reason: reason}
	return call[TurnResult](ctx, c, http.MethodPost, convPath(conversationID, "/turns/abort"), body)
}

// Delegate lets the agent to write into agentID's open turn (empty
// agentID: the token's agent), with that turn's turnId, until the turn
// closes: a supervisor hands part of its work to a worker.
func (c *Client) Delegate(ctx context.Context, conversationID, agentID, to string) (*TurnResult, error) {
	body := parley.DelegateRequest{AgentID: agentID, To: to}
	return call[TurnResult](ctx, c, http.MethodPost, convPath(conversationID, "/delegations"), body)
}

// Ask queues a prompt (mode followup, steer, collect or reject; empty:
// followup) from agentID (needed only with an admin token or an open
// server), and returns its id: QueuePrompt's short form. Prompt says
// where it stands; AskAndWait waits for its answer.
func (c *Client) Ask(ctx context.Context, conversationID, agentID, content, mode string) (string, error) {
	var r struct {
		ID string `json:"id"`
	}
	body := parley.QueuePromptRequest{AgentID: agentID, Content: content, Mode: mode}
	return r.ID, c.do(ctx, http.MethodPost, convPath(conversationID, "/prompts"), body, &r)
}

// Message returns one message of a conversation.
func (c *Client) Message(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	return call[parley.Message](ctx, c, http.MethodGet, convPath(conversationID, "/messages/"+url.PathEscape(messageID)), nil)
}

// Messages returns up to limit messages with seq > after, oldest first
// (limit 0: the server's default), and the seq to continue after (0 on the
// last page). A message still streaming is shown with all its text so far.
func (c *Client) Messages(ctx context.Context, conversationID string, after int64, limit int) ([]*parley.Message, int64, error) {
	var r struct {
		Messages  []*parley.Message `json:"messages"`
		NextAfter int64             `json:"nextAfter"`
	}
	q := fmt.Sprintf("/messages?after=%d", after)
	if limit > 0 {
		q += fmt.Sprintf("&limit=%d", limit)
	}
	if err := c.do(ctx, http.MethodGet, convPath(conversationID, q), nil, &r); err != nil {
		return nil, 0, err
	}
	return r.Messages, r.NextAfter, nil
}

// AllMessages reads every message of a conversation, oldest first, limit
// to a page (0: the server's default); pages are also cut by bytes, so a
// page of large messages stays small.
func (c *Client) AllMessages(ctx context.Context, conversationID string, limit int) ([]*parley.Message, error) {
	var all []*parley.Message
	for after := int64(0); ; {
		ms, next, err := c.Messages(ctx, conversationID, after, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
		if next == 0 {
			return all, nil
		}
		after = next
	}
}

// Events reads up to limit events after seq after, oldest first (limit 0:
// the server's default), and the seq to continue after (0 on the last
// page). A page of large events may end before limit: continue while the
// seq to continue after is not 0. ListEvents and EachEvent do the same
// with an options struct and an iterator.
func (c *Client) Events(ctx context.Context, conversationID string, after int64, limit int) ([]parley.Event, int64, error) {
	var r struct {
		Events    []parley.Event `json:"events"`
		NextAfter int64          `json:"nextAfter"`
	}
	q := fmt.Sprintf("/events?after=%d", after)
	if limit > 0 {
		q += fmt.Sprintf("&limit=%d", limit) // limit=0 is out of range: 0 means the server's default
	}
	if err := c.do(ctx, http.MethodGet, convPath(conversationID, q), nil, &r); err != nil {
		return nil, 0, err
	}
	return r.Events, r.NextAfter, nil
}

func convPath(id, rest string) string { return "/v1/conversations/" + url.PathEscape(id) + rest }

// call sends one request and decodes the JSON answer into a new T; on error
// it returns nil with the error, never a half-filled result.
func call[T any](ctx context.Context, c *Client, method, path string, body any) (*T, error) {
	var out T
	if err := c.do(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// do sends one request and decodes the JSON answer into out. A non-2xx answer
// becomes a *parley.Error with the server's code, message and head.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	return c.doBody(ctx, method, path, rd, out)
}

// doBody is do with a body that is sent as it is read (nil: none).
func (c *Client) doBody(ctx context.Context, method, path string, rd io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, resp.Header, data)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}
