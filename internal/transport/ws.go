package transport

import (
	"context"
	"net/http"

	"github.com/gobwas/ws"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/transport/wsconn"
)

// WS writes conversation id's stream from follower sub over WebSocket:
// text frames of JSON, the same frames as SSE. The follower is made before
// the upgrade, so that an unknown conversation is a plain 404. Once
// upgraded, WS writes the init frame and returns; what the follower yields
// is written by a goroutine that runs only while there is something to
// write (see streamPump), and what the client sends is read as it comes
// (wsconn.Conn.Watch, with no goroutine waiting on it meanwhile): its
// pings are answered, and its close frame is answered and ends the stream
// at once, as does the end of its connection. A client that answers no
// ping for a heartbeat is gone.
//
// ctx is the stream's own (the server ends the stream by ending it, with
// a *parley.Error cause that the error frame and close tell), leave is
// called once the client closed or left, and done once the stream ended.
// If the stream cannot start, sub is closed and done called; an error is
// returned, for the caller to answer, when nothing was written (no init
// frame can be made), and nil when the upgrade answered the client (403
// for a foreign origin).
func (t *Streams) WS(ctx context.Context, w http.ResponseWriter, r *http.Request, id string, sub *engine.Follower, leave, done func()) error {
	init, _, err := startInit(sub)
	if err != nil {
		sub.Close()
		done()
		return err
	}
	c, err := wsconn.Upgrade(w, r, wsconn.Options{OriginPatterns: t.opts.OriginPatterns, WriteTimeout: t.opts.WriteTimeout})
	if err != nil {
		sub.Close()
		done()
		return nil // Upgrade answered the client
	}
	t.writeWS(ctx, c, id, sub, init, done)
	// Until the client closes or leaves, or the writer closed; then the
	// writer ends the stream. No goroutine waits on an idle client (see
	// wsconn.Conn.Watch).
	c.Watch(func(error) { leave() })
	return nil
}

// writeWS writes a follower's stream to a WebSocket connection, from the
// init frame on, until either ends (see streamPump: no goroutine is held
// while the stream is quiet), then closes it with a status that says
// whether to come back, and calls done.
func (t *Streams) writeWS(ctx context.Context, c *wsconn.Conn, id string, sub *engine.Follower, init []byte, done func()) {
	finish := func(end error) {
		defer done()
		defer sub.Close()
		defer c.CloseNow()
		t.closeWS(c, id, end)
	}
	// A client that stops reading is cut off by the connection's write
	// timeout (wsconn.Options.WriteTimeout).
	if writeInit(sub, func() error {
		if err := c.WriteText(init); err != nil {
			return err
		}
		return c.Flush()
	}, c.Abort, c.Resume) != nil {
		c.CloseNow()
		sub.Close()
		done()
		return
	}
	t.pump(ctx, sub, func(it feed.Item) error {
		_, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		return c.WriteText(data)
	}, c.Flush, c.Ping, finish)
}

// closeWS closes a stream's connection: after the error frame of a stream
// the server ended, with a status that says whether to come back.
func (t *Streams) closeWS(c *wsconn.Conn, id string, end error) {
	data := t.EndFrame(id, end)
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
		status, reason = StatusDeleted, "conversation deleted"
	case parley.EUNAUTHORIZED:
		status, reason = StatusUnauthorized, "unauthorized"
	case parley.EFORBIDDEN:
		status, reason = StatusForbidden, "forbidden"
	}
	c.Close(status, reason)
}

// The close codes of the range for applications (4000-4999) that Parley
// closes streams and runner connections with: 4000 plus the HTTP status
// the same request now gets. Reconnecting cannot help.
const (
	// StatusDeleted closes the streams and runner connections of a
	// deleted conversation (404).
	StatusDeleted ws.StatusCode = 4404
	// StatusUnauthorized closes the streams and runner connections whose
	// token was revoked, or that an open server let in once it requires
	// tokens (401). Reconnecting with the same token cannot help.
	StatusUnauthorized ws.StatusCode = 4401
	// StatusForbidden closes the streams whose right to read ended while
	// they were open (a delegate's, when its turn ends): 403.
	StatusForbidden ws.StatusCode = 4403
)
