package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sse"
)

// Transport selects how a Stream connects.
type Transport string

// Transports.
const (
	SSE       Transport = "sse"
	WebSocket Transport = "ws"
)

// SubscribeOptions configure a Stream.
type SubscribeOptions struct {
	// From resumes after this position; nil starts with a snapshot.
	From *parley.Position
	// Transport is SSE (default) or WebSocket.
	Transport Transport
	// MinBackoff and MaxBackoff bound the wait between reconnects
	// (defaults 100ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// OnReconnect, if set, is called with the error that broke the connection
	// before each reconnect.
	OnReconnect func(err error)
}

// Init is the first frame of every connection.
type Init struct {
	Recovered    bool                `json:"recovered"`
	Position     parley.Position     `json:"position"`
	Conversation parley.Conversation `json:"conversation"`
	Head         parley.Head         `json:"head"`
	Guidance     *parley.Guidance    `json:"guidance"`
	Messages     []*parley.Message   `json:"messages,omitempty"`
	// Streaming is, in a snapshot, the text each agent streams with no
	// message yet (conversations made with messageFormat v1), as of
	// Position, in the order they started.
	Streaming []StreamingText `json:"streaming,omitempty"`
}

// Frame is one thing a Stream yields: an init (after each connect), an event
// of the log, or a guidance.
type Frame struct {
	Type     string
	Init     *Init
	Event    *parley.Event
	Guidance *parley.Guidance
}

// Stream follows one conversation and reconnects by itself, resuming from
// the last position it delivered, so its caller sees every event exactly once
// and in order (an init with Recovered false means the history was replaced or
// could not be recovered: start over from its snapshot).
type Stream struct {
	c      *Client
	id     string
	opts   SubscribeOptions
	pos    *parley.Position
	conn   frameReader
	failed int
}

// frameReader reads raw frames from one connection.
type frameReader interface {
	read(ctx context.Context) (typ string, data []byte, err error)
	close()
}

// Subscribe returns a Stream of a conversation; it connects on the first Next.
func (c *Client) Subscribe(_ context.Context, conversationID string, opts SubscribeOptions) *Stream {
	if opts.Transport == "" {
		opts.Transport = SSE
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	return &Stream{c: c, id: conversationID, opts: opts, pos: opts.From}
}

// Position returns the position of the last event delivered (nil before any).
func (s *Stream) Position() *parley.Position { return s.pos }

// Close closes the current connection.
func (s *Stream) Close() {
	if s.conn != nil {
		s.conn.close()
		s.conn = nil
	}
}

// Next returns the next frame. It reconnects on connection errors and
// returns an error only when ctx ends or the server refuses the stream
// (unknown conversation, bad token).
func (s *Stream) Next(ctx context.Context) (Frame, error) {
	for {
		if s.conn == nil {
			if err := s.connect(ctx); err != nil {
				if fatal(err) || ctx.Err() != nil {
					return Frame{}, err
				}
				if err := s.backoff(ctx, err); err != nil {
					return Frame{}, err
				}
				continue
			}
		}
		typ, data, err := s.conn.read(ctx)
		if err == nil {
			f, skip, ferr := s.accept(typ, data)
			if ferr == nil && !skip {
				s.failed = 0
				return f, nil
			}
			err = ferr
		}
		if err != nil {
			s.Close()
			if ctx.Err() != nil {
				return Frame{}, ctx.Err()
			}
			if err := s.backoff(ctx, err); err != nil {
				return Frame{}, err
			}
		}
	}
}

// Frames iterates over the stream's frames, as Next returns them, until
// ctx ends or the server refuses the stream: that error is yielded once,
// with a zero Frame, and ends the iteration. Breaking out of the loop
// leaves the stream where it is: Close it, or range over Frames again to
// go on.
func (s *Stream) Frames(ctx context.Context) iter.Seq2[Frame, error] {
	return func(yield func(Frame, error) bool) {
		for {
			f, err := s.Next(ctx)
			if !yield(f, err) || err != nil {
				return
			}
		}
	}
}

// accept decodes a frame and updates the position; skip is true for a
// duplicate event. A server error frame or a gap is returned as an error,
// which makes Next reconnect from the last position.
func (s *Stream) accept(typ string, data []byte) (f Frame, skip bool, err error) {
	if (typ == "" || (typ != "init" && typ != "guidance" && typ != "error")) && bytes.HasPrefix(data, []byte(`{"conversationId":`)) {
		// An event, as the server writes every one: read without
		// reflection (see parley.ParseEvent).
		ev, err := parley.ParseEvent(data)
		if err != nil {
			return f, false, err
		}
		return s.event(ev)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return f, false, fmt.Errorf("bad frame: %w", err)
	}
	if typ == "" {
		typ = head.Type // WebSocket frames name their type inside
	}
	f.Type = typ
	switch typ {
	case "init":
		var in Init
		if err := json.Unmarshal(data, &in); err != nil {
			return f, false, err
		}
		p := in.Position
		s.pos, f.Init = &p, &in
	case "guidance":
		var g struct {
			Data parley.Guidance `json:"data"`
		}
		if err := json.Unmarshal(data, &g); err != nil {
			return f, false, err
		}
		f.Guidance = &g.Data
	case "error":
		return f, false, frameError(data)
	default:
		ev, err := parley.ParseEvent(data)
		if err != nil {
			return f, false, err
		}
		return s.event(ev)
	}
	return f, false, nil
}

// event takes an event frame: skip is true for a duplicate; a gap is an
// error.
func (s *Stream) event(ev parley.Event) (f Frame, skip bool, err error) {
	f.Type = ev.Type
	if s.pos != nil && ev.Seq <= s.pos.Seq {
		return f, true, nil
	}
	if s.pos != nil && ev.Seq != s.pos.Seq+1 {
		return f, false, fmt.Errorf("gap in stream: got seq %d after %d", ev.Seq, s.pos.Seq)
	}
	epoch := ""
	if s.pos != nil {
		epoch = s.pos.Epoch
	}
	s.pos, f.Event = &parley.Position{Seq: ev.Seq, Epoch: epoch}, &ev
	return f, false, nil
}

func (s *Stream) backoff(ctx context.Context, cause error) error {
	if s.opts.OnReconnect != nil {
		s.opts.OnReconnect(cause)
	}
	d := s.opts.MinBackoff << min(s.failed, 10)
	d = min(d, s.opts.MaxBackoff)
	s.failed++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fatal reports whether reconnecting cannot help.
func fatal(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && se.Status != http.StatusTooManyRequests
}

func (s *Stream) query() url.Values {
	q := url.Values{}
	if s.pos != nil {
		q.Set("after", strconv.FormatInt(s.pos.Seq, 10))
		if s.pos.Epoch != "" {
			q.Set("epoch", s.pos.Epoch)
		}
	}
	return q
}

func (s *Stream) connect(ctx context.Context) error {
	if s.opts.Transport == WebSocket {
		return s.connectWS(ctx)
	}
	return s.connectSSE(ctx)
}

func (s *Stream) connectSSE(ctx context.Context) error {
	u := s.c.baseURL + convPath(s.id, "/stream")
	if q := s.query().Encode(); q != "" {
		u += "?" + q
	}
	cctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	s.c.authorize(req)
	resp, err := s.c.http.Do(req)
	if err != nil {
		cancel()
		return err
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		return decodeError(resp.StatusCode, resp.Header, data)
	}
	s.conn = newSSEReader(resp.Body, cancel, maxFrame)
	return nil
}

// maxFrame bounds one frame from the server, on either transport (and on
// the runner connection): the server keeps every frame under it.
const maxFrame = parley.MaxFrameBytes

// errFrameTooLarge ends a connection whose server sent a frame over the bound.
var errFrameTooLarge = errors.New("a frame from the server is over the size limit")

// sseReader reads one SSE connection's frames (see internal/sse): one
// event is at most max bytes, and a connection that ends, even mid-event,
// ends with io.EOF.
type sseReader struct {
	body   io.Closer
	events *sse.Reader
	cancel context.CancelFunc
}

func newSSEReader(body io.ReadCloser, cancel context.CancelFunc, max int) *sseReader {
	return &sseReader{body: body, events: sse.NewReader(body, max), cancel: cancel}
}

func (r *sseReader) read(ctx context.Context) (string, []byte, error) {
	stop := context.AfterFunc(ctx, r.cancel)
	defer stop()
	ev, err := r.events.Next()
	switch {
	case errors.Is(err, sse.ErrTooLarge):
		return "", nil, errFrameTooLarge
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "", nil, io.EOF
	case err != nil:
		return "", nil, err
	}
	return ev.Type, ev.Data, nil
}

func (r *sseReader) close() { r.cancel(); r.body.Close() }

func (s *Stream) connectWS(ctx context.Context) error {
	u := strings.Replace(s.c.baseURL, "http", "ws", 1) + convPath(s.id, "/ws")
	if q := s.query().Encode(); q != "" {
		u += "?" + q
	}
	conn, err := s.c.dialWS(ctx, u)
	if err != nil {
		return err
	}
	s.conn = &wsReader{conn: conn}
	return nil
}

// dialWS opens a WebSocket to u with the client's token. A refused
// handshake returns the server's error (its status, code and message), so
// that a bad token or an unknown conversation is not taken for a network
// failure worth retrying.
func (c *Client) dialWS(ctx context.Context, u string) (*websocket.Conn, error) {
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			var data []byte
			if resp.Body != nil {
				data, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			}
			return nil, decodeError(resp.StatusCode, resp.Header, data)
		}
		return nil, err
	}
	conn.SetReadLimit(maxFrame)
	return conn, nil
}

type wsReader struct{ conn *websocket.Conn }

func (r *wsReader) read(ctx context.Context) (string, []byte, error) {
	_, data, err := r.conn.Read(ctx)
	return "", data, err
}

func (r *wsReader) close() { r.conn.CloseNow() }
