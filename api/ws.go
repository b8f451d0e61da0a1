package api

import (
	"context"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/feed"
)

// streamWS serves a conversation over WebSocket: text frames of JSON, the
// same frames as SSE. The subscription is made before the upgrade, so an
// unknown conversation is a plain 404.
func (s *Server) streamWS(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	from, err := position(r)
	if err == nil {
		err = s.readable(r, who)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id := r.PathValue("id")
	// The stream outlives the handshake's request context, so it has its own,
	// ended by the read loop when the client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Revoking the token ends the stream (not the reads, so that the error
	// frame and the close still go out).
	pctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	release, ok := s.connect(w, who, cut)
	if !ok {
		return
	}
	defer release()
	sub, err := s.eng.Subscribe(ctx, id, from)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer sub.Close()
	init, _, err := startInit(sub)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns})
	if err != nil {
		return // Accept has answered the client (403 for a foreign origin)
	}
	defer c.CloseNow()

	// Read (and discard) what the client sends, so that pings, pongs and its
	// close are handled; a read error means the client is gone.
	go func() {
		defer cancel()
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()

	// Writes use a context that cannot be canceled: coder/websocket sets up a
	// context watcher per write for one that can, which costs a third of the
	// throughput. A client that stops reading is cut off instead by one timer,
	// armed at the start of a batch and stopped at its end.
	deadline := time.AfterFunc(time.Hour, func() { c.CloseNow() })
	deadline.Stop()
	defer deadline.Stop()
	armed := false
	send := func(b []byte) error {
		if !armed {
			deadline.Reset(s.opts.WriteTimeout)
			armed = true
		}
		return c.Write(context.Background(), websocket.MessageText, b)
	}
	flush := func() error {
		deadline.Stop()
		armed = false
		return nil
	}

	if send(init) != nil {
		return
	}
	_ = flush()
	end := s.pumpStream(pctx, sub, func(it feed.Item) error {
		_, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		return send(data)
	}, flush, func() error {
		pctx, pcancel := context.WithTimeout(ctx, s.opts.WriteTimeout)
		defer pcancel()
		return c.Ping(pctx)
	})
	data := s.endFrame(id, end)
	if data == nil {
		c.Close(websocket.StatusNormalClosure, "")
		return
	}
	if send(data) != nil {
		return
	}
	_ = flush()
	status, reason := websocket.StatusInternalError, "resume from your last position"
	switch parley.ErrorCode(end) {
	case parley.EBUSY, parley.EUNAVAILABLE:
		status = websocket.StatusTryAgainLater // slow or shutting down: resume later
	case parley.ENOTFOUND:
		status, reason = statusDeleted, "conversation deleted"
	case parley.EUNAUTHORIZED:
		status, reason = statusUnauthorized, "unauthorized"
	}
	c.Close(status, reason)
}

// statusDeleted closes the streams and runner connections of a deleted
// conversation: a close code of the range for applications (4000-4999),
// 4000 plus the HTTP status the conversation now answers, 404. Unlike the
// other codes, it says that reconnecting cannot help.
const statusDeleted websocket.StatusCode = 4404
