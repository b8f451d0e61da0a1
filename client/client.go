// Package client is the Go SDK for Parley's HTTP API and live streams. It
// imports no server package: only the domain types of package parley.
//
//	c := client.New("http://127.0.0.1:7700", os.Getenv("PARLEY_TOKEN"))
//	res, err := c.PostMessage(ctx, convID, client.Message{Role: "user", Content: "hello"})
//	st := c.Subscribe(ctx, convID, client.SubscribeOptions{})
//	for { f, err := st.Next(ctx); ... }
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
type NewConversation struct {
	ID            string            `json:"id,omitempty"`
	Title         string            `json:"title,omitempty"`
	Participants  []string          `json:"participants,omitempty"`
	TurnPolicy    parley.TurnPolicy `json:"turnPolicy,omitempty"`
	MessageFormat string            `json:"messageFormat,omitempty"`
	Metadata      json.RawMessage   `json:"metadata,omitempty"`
}

// Precondition is a turn precondition {expectTurn, startingTurn}.
type Precondition struct {
	ExpectTurn   int  `json:"expectTurn"`
	StartingTurn bool `json:"startingTurn"`
}

// Message is the body of PostMessage. Give Content or Parts.
type Message struct {
	ID              string          `json:"id,omitempty"`
	AgentID         string          `json:"agentId,omitempty"`
	Role            parley.Role     `json:"role,omitempty"`
	Content         string          `json:"content,omitempty"`
	Parts           []parley.Part   `json:"parts,omitempty"`
	ReplyTo         string          `json:"replyTo,omitempty"`
	TurnID          string          `json:"turnId,omitempty"`
	Finality        parley.Finality `json:"finality,omitempty"`
	Next            string          `json:"next,omitempty"`
	Precondition    *Precondition   `json:"precondition,omitempty"`
	Channel         *parley.Channel `json:"channel,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	ClientRequestID string          `json:"clientRequestId,omitempty"`
}

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
	var v View
	return &v, c.do(ctx, http.MethodPost, "/v1/conversations", nc, &v)
}

// Conversation returns a conversation's view.
func (c *Client) Conversation(ctx context.Context, id string) (*View, error) {
	var v View
	return &v, c.do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(id), nil, &v)
}

// PostMessage writes a message.
func (c *Client) PostMessage(ctx context.Context, conversationID string, m Message) (*MessageResult, error) {
	var r MessageResult
	return &r, c.do(ctx, http.MethodPost, convPath(conversationID, "/messages"), m, &r)
}

// Claim claims the next turn for agentID (empty: the token's agent).
func (c *Client) Claim(ctx context.Context, conversationID, agentID string, expectTurn int) (*TurnResult, error) {
	body := map[string]any{"agentId": agentID, "expectTurn": expectTurn}
	var r TurnResult
	return &r, c.do(ctx, http.MethodPost, convPath(conversationID, "/turns/claim"), omitEmpty(body), &r)
}

// Reset resets the agent's open turn; with claim, claims the next turn otherwise.
func (c *Client) Reset(ctx context.Context, conversationID, agentID string, claim bool) (*TurnResult, error) {
	body := map[string]any{"agentId": agentID, "claim": claim}
	var r TurnResult
	return &r, c.do(ctx, http.MethodPost, convPath(conversationID, "/turns/reset"), omitEmpty(body), &r)
}

// Abort gives up the agent's open turn.
func (c *Client) Abort(ctx context.Context, conversationID, agentID, reason string) (*TurnResult, error) {
	body := map[string]any{"agentId": agentID, "reason": reason}
	var r TurnResult
	return &r, c.do(ctx, http.MethodPost, convPath(conversationID, "/turns/abort"), omitEmpty(body), &r)
}

// Prompt queues a prompt (mode followup, steer, collect or reject; empty:
// followup) from agentID (needed only with an admin token or an open server).
func (c *Client) Prompt(ctx context.Context, conversationID, agentID, content, mode string) (string, error) {
	var r struct {
		ID string `json:"id"`
	}
	body := omitEmpty(map[string]any{"agentId": agentID, "content": content, "mode": mode})
	return r.ID, c.do(ctx, http.MethodPost, convPath(conversationID, "/prompts"), body, &r)
}

// Message returns one message of a conversation.
func (c *Client) Message(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	var m parley.Message
	return &m, c.do(ctx, http.MethodGet, convPath(conversationID, "/messages/"+url.PathEscape(messageID)), nil, &m)
}

// Events reads up to limit events after seq after.
func (c *Client) Events(ctx context.Context, conversationID string, after int64, limit int) ([]parley.Event, error) {
	var r struct {
		Events []parley.Event `json:"events"`
	}
	err := c.do(ctx, http.MethodGet, convPath(conversationID, fmt.Sprintf("/events?after=%d&limit=%d", after, limit)), nil, &r)
	return r.Events, err
}

func convPath(id, rest string) string { return "/v1/conversations/" + url.PathEscape(id) + rest }

func omitEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		if v == "" || v == 0 || v == false {
			delete(m, k)
		}
	}
	return m
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
		return decodeError(resp.StatusCode, data)
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

// StatusError is returned for a non-2xx answer: the server's error with the
// HTTP status it came with.
type StatusError struct {
	Status int
	Err    *parley.Error
}

// Error implements error.
func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Err.Error()) }

// Unwrap returns the *parley.Error, so that parley.ErrorCode works on it.
func (e *StatusError) Unwrap() error { return e.Err }

func decodeError(status int, data []byte) error {
	var body struct {
		Error struct {
			Code    string       `json:"code"`
			Message string       `json:"message"`
			Head    *parley.Head `json:"head"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &body); err != nil || body.Error.Code == "" {
		return &StatusError{Status: status, Err: parley.Errorf(parley.EINTERNAL, "HTTP %d: %.200s", status, data)}
	}
	return &StatusError{Status: status, Err: &parley.Error{Code: body.Error.Code, Message: body.Error.Message, Head: body.Error.Head}}
}
