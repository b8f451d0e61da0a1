package transport

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
)

// Both transports carry the same JSON frames: an init, then each event as
// the parley.Event itself, guidance frames between them, and an error frame
// when the server ends the stream.

// initFrame is the first frame of every stream.
type initFrame struct {
	Type string `json:"type"`
	engine.Init
}

// guidanceFrame carries a guidance; it has no seq, since guidance is never stored.
type guidanceFrame struct {
	Type           string           `json:"type"`
	ConversationID string           `json:"conversationId"`
	AfterSeq       int64            `json:"afterSeq"`
	Turn           int              `json:"turn"`
	AgentID        string           `json:"agentId"`
	Data           *parley.Guidance `json:"data"`
}

// errorFrame is the last frame of a stream the server ends.
type errorFrame struct {
	Type  string         `json:"type"`
	Error map[string]any `json:"error"`
}

// encodeItem returns an item's frame and its SSE event name.
func encodeItem(conversationID string, it feed.Item) (string, []byte, error) {
	if it.Event != nil {
		return it.Event.Type, it.JSON(), nil
	}
	g := it.Guidance
	b, err := json.Marshal(guidanceFrame{Type: "guidance", ConversationID: conversationID, AfterSeq: g.AfterSeq, Turn: g.Turn, AgentID: g.NextAgentID, Data: g})
	return "guidance", b, err
}

// startInit returns the init frame of a follower and the epoch its event
// ids carry (the conversation's, even if the client sent none). The
// snapshot counts against what the server may hold for streams that are
// not read (engine.Options.SubscriberMemory) from before its frame is
// made until the caller has written it (see writeInit); once the frame is
// made, it is the snapshot's only copy (the follower lets go of its
// messages). If no room can be made for it, the error is 503 unavailable,
// and no frame is made.
func startInit(f *engine.Follower) ([]byte, string, error) {
	in := f.Init
	f.Init.Messages, f.Init.Streaming = nil, nil
	if in.Position.Epoch == "" {
		in.Position.Epoch = in.Conversation.Epoch
	}
	if !f.Holding(in.Bytes) {
		return nil, "", errNoRoom
	}
	b, err := json.Marshal(initFrame{Type: "init", Init: in})
	if err != nil {
		return nil, "", err
	}
	if !f.Holding(len(b)) {
		return nil, "", errNoRoom
	}
	return b, in.Position.Epoch, nil
}

// errNoRoom refuses a stream whose init frame does not fit in what the
// server may hold for streams that are not read, when no other stream can
// make room: every one that holds something read more recently.
var errNoRoom = &parley.Error{Code: parley.EUNAVAILABLE, Details: map[string]any{"retryAfterSeconds": 1},
	Message: "the server holds as much as it may for streams that are not read, and none can make room for this one's snapshot; retry in a moment"}

// writeInit writes a follower's init frame with write (which returns once
// the frame is written, or failed), and then tells the follower that it no
// longer holds it. Should the server drop the stream meanwhile to make
// room for others (it has read nothing of a frame that weighs a snapshot,
// and has no position to resume from yet), abort makes the write fail at
// once, and the stream ends: the client comes back as it came. An end that
// came only as the write finished (the server shutting down just after the
// frame went out) aborted no write: resume undoes its abort, so that the
// error frame that tells the client why still goes out.
func writeInit(f *engine.Follower, write func() error, abort, resume func()) error {
	done := f.Done()
	f.Notify(func() {
		select {
		case <-done:
			abort()
		default:
		}
	})
	err := write()
	f.Notify(nil) // under the follower's lock: no abort comes after it
	if err == nil {
		resume()
	}
	f.Holding(0)
	return err
}

// ErrClientGone ends a stream whose client left or stopped reading.
var ErrClientGone = errors.New("client went away")

// EndFrame is the error frame sent when the server ends a stream, or nil
// when the client ended it. Its error is Options.ErrorBody's: an internal
// error is logged and sent as "internal error", as for every other answer.
func (t *Streams) EndFrame(conversationID string, err error) []byte {
	if err == nil || errors.Is(err, ErrClientGone) {
		return nil
	}
	body := t.opts.ErrorBody(err)
	if body["code"] == parley.EINTERNAL {
		t.opts.Logger.Error("stream ended by an internal error", slog.String("conversation", conversationID), slog.Any("err", err))
	}
	b, _ := json.Marshal(errorFrame{Type: "error", Error: body})
	return b
}

// CutOff returns why ctx ended if the server ended it (a *parley.Error
// cause: the token was revoked), else err.
func CutOff(ctx context.Context, err error) error {
	var e *parley.Error
	if errors.As(context.Cause(ctx), &e) {
		return e
	}
	return err
}

// streamEnd says why a follower ended: the client's context ending is
// ErrClientGone, anything else is the server's reason.
func streamEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ErrClientGone
	}
	return err
}

// SubEnd says why a subscription's channel closed: the client's context
// ending is ErrClientGone, anything else is the server's reason.
func SubEnd(sub *engine.Subscription) error {
	if err := sub.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return ErrClientGone
}
