package api

import (
	"context"
	"net/http"

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := s.eng.Subscribe(ctx, id, from)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer sub.Close()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns})
	if err != nil {
		return // Accept has answered the client
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

	// One timeout per batch, not per frame: a context with a timer per write
	// costs a third of the throughput.
	var wctx context.Context
	var wcancel context.CancelFunc = func() {}
	defer func() { wcancel() }()
	batch := func() context.Context {
		if wctx == nil {
			wctx, wcancel = context.WithTimeout(ctx, s.opts.WriteTimeout)
		}
		return wctx
	}
	send := func(b []byte) error { return c.Write(batch(), websocket.MessageText, b) }

	init, err := encodeInit(sub.Init)
	if err != nil || send(init) != nil {
		return
	}
	end := s.pumpStream(ctx, sub, func(it engine.Item) error {
		_, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		return send(data)
	}, func() error {
		wcancel()
		wctx = nil
		return nil
	}, func() error {
		pctx, pcancel := context.WithTimeout(ctx, s.opts.WriteTimeout)
		defer pcancel()
		return c.Ping(pctx)
	})
	if frame := endFrame(end); frame != nil {
		wctx = nil
		_ = send(frame)
		c.Close(websocket.StatusTryAgainLater, "resume from your last position")
		return
	}
	c.Close(websocket.StatusNormalClosure, "")
}
