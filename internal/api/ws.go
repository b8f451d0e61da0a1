package api

import (
	"context"
	"net/http"

	"github.com/gobwas/ws"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/wsconn"
)

// streamWS serves a conversation over WebSocket: text frames of JSON, the
// same frames as SSE. The subscription is made before the upgrade, so an
// unknown conversation is a plain 404. Once upgraded, the handler writes
// the init frame and returns; what the follower yields is written by a
// goroutine that runs only while there is something to write (see
// streamPump), and what the client sends is read as it comes
// (wsconn.Conn.Watch, with no goroutine waiting on it meanwhile): its
// pings are answered, and its
// close frame is answered and ends the stream at once, as does the end of
// its connection. A client that answers no ping for a heartbeat is gone.
func (s *Server) streamWS(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	from, err := position(r)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id := r.PathValue("id")
	// The stream outlives the handshake's request, so it has its own
	// context, ended by the read loop when the client goes away. Revoking
	// the token (or the end of a delegate's turn) ends the stream (not the
	// reads, so that the error frame and the close still go out).
	ctx, cancel := context.WithCancel(context.Background())
	pctx, cut := context.WithCancelCause(ctx)
	release, ok := s.connectReader(w, r, who, cut)
	if !ok {
		cancel()
		return
	}
	sub, err := s.eng.Follow(ctx, id, from)
	if err == nil {
		var init []byte
		if init, _, err = startInit(sub); err == nil {
			var c *wsconn.Conn
			if c, err = wsconn.Upgrade(w, r, wsconn.Options{OriginPatterns: s.opts.OriginPatterns, WriteTimeout: s.opts.WriteTimeout}); err == nil {
				s.writeWS(pctx, c, id, sub, init, func() { cut(nil); cancel(); release() })
				// Until the client closes or leaves, or the writer closed;
				// then the writer ends the stream. No goroutine waits on an
				// idle client (see wsconn.Conn.Watch).
				c.Watch(func(error) { cancel() })
				return
			}
			sub.Close()
			release()
			cancel()
			return // Upgrade answered the client (403 for a foreign origin)
		}
		sub.Close()
	}
	release()
	cancel()
	writeErr(w, s.log, err)
}

// writeWS writes a follower's stream to a WebSocket connection, from the
// init frame on, until either ends (see streamPump: no goroutine is held
// while the stream is quiet), then closes it with a status that says
// whether to come back, and calls done.
func (s *Server) writeWS(ctx context.Context, c *wsconn.Conn, id string, sub *engine.Follower, init []byte, done func()) {
	finish := func(end error) {
		defer done()
		defer sub.Close()
		defer c.CloseNow()
		s.closeWS(c, id, end)
	}
	// A client that stops reading is cut off by the connection's write
	// timeout (wsconn.Options.WriteTimeout).
	if writeInit(sub, func() error {
		if err := c.WriteText(init); err != nil {
			return err
		}
		return c.Flush()
	}, c.Abort) != nil {
		c.CloseNow()
		sub.Close()
		done()
		return
	}
	s.pumpStream(ctx, sub, func(it feed.Item) error {
		_, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		return c.WriteText(data)
	}, c.Flush, c.Ping, finish)
}

// closeWS closes a stream's connection: after the error frame of a stream
// the server ended, with a status that says whether to come back.
func (s *Server) closeWS(c *wsconn.Conn, id string, end error) {
	data := s.endFrame(id, end)
	if data == nil {
		c.Close(wsconn.StatusNormal, "")
		return
	}
	if c.WriteText(data) != nil {
		return
	}
	status, reason := wsconn.StatusInternal, "resume from your last position"
	switch parley.ErrorCode(end) {
	case parley.EBUSY, parley.EUNAVAILABLE:
		status = wsconn.StatusTryAgain // slow or shutting down: resume later
	case parley.ENOTFOUND:
		status, reason = statusDeleted, "conversation deleted"
	case parley.EUNAUTHORIZED:
		status, reason = statusUnauthorized, "unauthorized"
	case parley.EFORBIDDEN:
		status, reason = statusForbidden, "forbidden"
	}
	c.Close(status, reason)
}

// statusDeleted closes the streams and runner connections of a deleted
// conversation: a close code of the range for applications (4000-4999),
// 4000 plus the HTTP status the conversation now answers, 404. Unlike the
// other codes, it says that reconnecting cannot help.
const statusDeleted ws.StatusCode = 4404
