package api

import (
	"context"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/engine"
)

// streamWS serves a conversation over WebSocket: text frames of JSON, the
// same frames as SSE. The subscription is made before the upgrade, so an
// unknown conversation is a plain 404.
func (s *Server) streamWS(w http.ResponseWriter, r *http.Request, _ parley.Identity) {
	from, err := position(r)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id := r.PathValue("id")
	// The stream outlives the handshake's request context, so it has its own,
	// ended by the read loop when the client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	end := s.pumpStream(ctx, sub, func(it engine.Item) error {
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
	status := websocket.StatusInternalError
	switch parley.ErrorCode(end) {
	case parley.EBUSY, parley.EUNAVAILABLE:
		status = websocket.StatusTryAgainLater // slow or shutting down: resume later
	}
	c.Close(status, "resume from your last position")
}
