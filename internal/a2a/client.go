package a2a

// The client side: a JSON-RPC caller of one agent's interface, in either
// version, with its stream reader (Server-Sent Events whose data are
// JSON-RPC responses), and the fetch of an agent's card. What it returns is
// always 1.0's objects: a 0.3 agent's are translated as they come.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/sse"
)

// DefaultMaxEvent bounds one event of a stream, and one response, when a
// Client sets no bound of its own.
const DefaultMaxEvent = 8 << 20

// maxCard bounds an agent card.
const maxCard = 1 << 20

// DefaultCardTimeout bounds the fetch of an agent card when the caller's
// ctx sets no shorter deadline.
const DefaultCardTimeout = 30 * time.Second

// FetchCard reads the agent card at cardURL (GET, with header's fields) as
// CardFromJSON does: a card of either version. The fetch is bounded by
// timeout (DefaultCardTimeout if 0) and the card by 1 MiB.
func FetchCard(ctx context.Context, hc *http.Client, cardURL string, header http.Header, timeout time.Duration) (*AgentCard, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	if timeout <= 0 {
		timeout = DefaultCardTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the agent card: %w", err)
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body, maxCard)
	if err != nil {
		return nil, fmt.Errorf("fetching the agent card: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the agent card %s: %s: %s", cardURL, resp.Status, clip(body))
	}
	card, err := CardFromJSON(body)
	if err != nil {
		return nil, fmt.Errorf("the agent card at %s: %w", cardURL, err)
	}
	return card, nil
}

// JSONRPCInterface picks the card's JSON-RPC interface this package speaks:
// the first of protocol version 1.0, else the first of 0.3 (any 0.x is
// taken as 0.3). ok is false when the card has neither.
func JSONRPCInterface(card *AgentCard) (ai AgentInterface, ok bool) {
	var legacy *AgentInterface
	for i, in := range card.SupportedInterfaces {
		if !strings.EqualFold(in.ProtocolBinding, "JSONRPC") || in.URL == "" {
			continue
		}
		v := in.ProtocolVersion
		switch {
		case v == ProtocolVersion || strings.HasPrefix(v, "1."):
			in.ProtocolVersion = ProtocolVersion
			return in, true
		case (v == "" || strings.HasPrefix(v, "0.")) && legacy == nil:
			legacy = &card.SupportedInterfaces[i]
		}
	}
	if legacy == nil {
		return AgentInterface{}, false
	}
	ai = *legacy
	ai.ProtocolVersion = LegacyProtocolVersion
	return ai, true
}

// Client calls an agent's JSON-RPC interface. Its fields are read at each
// call; do not change them while calls are under way.
type Client struct {
	// URL is the interface's URL (AgentInterface.URL).
	URL string
	// Version is the protocol version spoken: ProtocolVersion or
	// LegacyProtocolVersion.
	Version string
	// Header holds fields sent with every request (Authorization, say).
	Header http.Header
	// HTTP makes the requests (nil: http.DefaultClient). It must not time
	// out a stream, which stays open while the agent works.
	HTTP *http.Client
	// MaxEvent bounds a response and a stream's event, in bytes
	// (DefaultMaxEvent if 0).
	MaxEvent int

	ids atomic.Int64
}

func (c *Client) legacy() bool { return c.Version == LegacyProtocolVersion }

func (c *Client) maxEvent() int {
	if c.MaxEvent > 0 {
		return c.MaxEvent
	}
	return DefaultMaxEvent
}

// method names a 1.0 method as the client's version spells it.
func (c *Client) method(m string) string {
	if !c.legacy() {
		return m
	}
	for legacy, current := range LegacyMethods {
		if current == m {
			return legacy
		}
	}
	return m
}

// post sends one JSON-RPC request and returns the HTTP response, whose
// body the caller closes.
func (c *Client) post(ctx context.Context, method string, params any, accept string) (*http.Response, error) {
	var raw json.RawMessage
	var err error
	if sp, ok := params.(*SendMessageRequest); ok && c.legacy() {
		raw, err = LegacySendParams(sp)
	} else {
		raw, err = json.Marshal(params)
	}
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(c.ids.Add(1), 10)
	body, err := json.Marshal(Request{JSONRPC: "2.0", ID: json.RawMessage(id), Method: c.method(method), Params: raw})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if !c.legacy() {
		req.Header.Set(VersionHeader, ProtocolVersion)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := readBounded(resp.Body, 4<<10)
		// A JSON-RPC error sent with an HTTP error status says more.
		var r Response
		if json.Unmarshal(b, &r) == nil && r.Error != nil {
			return nil, r.Error
		}
		return nil, fmt.Errorf("%s: %s: %s", c.method(method), resp.Status, clip(b))
	}
	return resp, nil
}

// call sends one request and returns its result.
func (c *Client) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	resp, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := readBounded(resp.Body, c.maxEvent())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.method(method), err)
	}
	return result(c.method(method), b)
}

// result reads a JSON-RPC response: its result, or its error.
func result(method string, b []byte) (json.RawMessage, error) {
	var r Response
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: the answer is not a JSON-RPC response: %w", method, err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	if len(r.Result) == 0 {
		return nil, fmt.Errorf("%s: the answer has neither result nor error", method)
	}
	return r.Result, nil
}

// event reads a send's result or a stream's event as a StreamResponse.
func (c *Client) event(raw json.RawMessage) (*StreamResponse, error) {
	if c.legacy() {
		return FromLegacyResult(raw)
	}
	var ev StreamResponse
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, err
	}
	if ev.Task == nil && ev.Message == nil && ev.StatusUpdate == nil && ev.ArtifactUpdate == nil {
		return nil, fmt.Errorf("a2a: an event with no task, message or update: %s", clip(raw))
	}
	return &ev, nil
}

// SendMessage sends a message and waits for the agent's answer (0.3's
// message/send, blocking): a task (StreamResponse.Task) or a message.
func (c *Client) SendMessage(ctx context.Context, req *SendMessageRequest) (*StreamResponse, error) {
	raw, err := c.call(ctx, MethodSendMessage, req)
	if err != nil {
		return nil, err
	}
	return c.event(raw)
}

// CancelTask asks the agent to cancel task id, and returns the task as
// the agent has it then.
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	raw, err := c.call(ctx, MethodCancelTask, &CancelTaskRequest{ID: id})
	if err != nil {
		return nil, err
	}
	return c.task(raw)
}

// GetTask returns task id as the agent has it.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	raw, err := c.call(ctx, MethodGetTask, &GetTaskRequest{ID: id})
	if err != nil {
		return nil, err
	}
	return c.task(raw)
}

// task reads a result that is a task.
func (c *Client) task(raw json.RawMessage) (*Task, error) {
	if c.legacy() {
		ev, err := FromLegacyResult(raw)
		if err != nil {
			return nil, err
		}
		if ev.Task == nil {
			return nil, errors.New("a2a: the answer is not a task")
		}
		return ev.Task, nil
	}
	var t Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	if t.ID == "" {
		return nil, errors.New("a2a: the answer is not a task")
	}
	return &t, nil
}

// SendStreamingMessage sends a message and returns the stream of the
// agent's answer. Close it when done; ctx ending closes it too.
func (c *Client) SendStreamingMessage(ctx context.Context, req *SendMessageRequest) (*Stream, error) {
	resp, err := c.post(ctx, MethodSendStreamingMessage, req, "text/event-stream")
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		// An agent may answer the request with one JSON-RPC response (an
		// error, most often) instead of a stream.
		defer resp.Body.Close()
		b, err := readBounded(resp.Body, c.maxEvent())
		if err != nil {
			return nil, err
		}
		raw, err := result(c.method(MethodSendStreamingMessage), b)
		if err != nil {
			return nil, err
		}
		ev, err := c.event(raw)
		if err != nil {
			return nil, err
		}
		return &Stream{c: c, one: ev}, nil
	}
	return &Stream{c: c, body: resp.Body, events: sse.NewReader(resp.Body, c.maxEvent())}, nil
}

// Stream is the stream of an agent's answer.
type Stream struct {
	c      *Client
	body   io.ReadCloser
	events *sse.Reader
	one    *StreamResponse // the one event of an answer that was not a stream
}

// errEventTooLarge ends a stream whose agent sent an event over the bound.
var errEventTooLarge = errors.New("a2a: an event is over the size limit")

// Next returns the stream's next event; io.EOF once the agent ended it.
// A JSON-RPC error the agent sends in the stream is returned as an *Error.
func (s *Stream) Next() (*StreamResponse, error) {
	if s.events == nil {
		if s.one == nil {
			return nil, io.EOF
		}
		ev := s.one
		s.one = nil
		return ev, nil
	}
	ev, err := s.events.Next()
	if errors.Is(err, sse.ErrTooLarge) {
		return nil, errEventTooLarge
	}
	if err != nil {
		return nil, err
	}
	raw, err := result(s.c.method(MethodSendStreamingMessage), ev.Data)
	if err != nil {
		return nil, err
	}
	return s.c.event(raw)
}

// Close ends the stream.
func (s *Stream) Close() error {
	if s.body == nil {
		return nil
	}
	return s.body.Close()
}

// readBounded reads r whole, refusing more than max bytes.
func readBounded(r io.Reader, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("a2a: the answer is over %d bytes", max)
	}
	return b, nil
}

// clip shortens a body quoted in an error.
func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
