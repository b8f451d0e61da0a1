package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/tick"
	"github.com/parleyhq/parley/internal/transport"
	"github.com/parleyhq/parley/internal/transport/wsconn"
)

// Every stream and runner connection is recorded under its token
// (tokens.Keeper.Connect), so that revoking the token ends it, and so that
// one token's connections are bounded (Guards.MaxConnsPerToken).

// errOpenEnded ends the connections an open server let in once it requires
// tokens.
var errOpenEnded = parley.Errorf(parley.EUNAUTHORIZED, "this server now requires a token: connect again with one")

// cutoff ends a connection from outside: end is what tokens.Keeper.Connect calls
// when the connection's token is revoked.
type cutoff struct {
	once sync.Once
	c    chan struct{}
	err  error
}

func newCutoff() *cutoff { return &cutoff{c: make(chan struct{})} }

func (c *cutoff) end(err error) { c.once.Do(func() { c.err = err; close(c.c) }) }

// ended reports whether end was called.
func (c *cutoff) ended() bool {
	select {
	case <-c.c:
		return true
	default:
		return false
	}
}

// connect records a live stream or runner connection of who, to be ended
// by end when its token is revoked; over the identity's bound of
// connections it answers 429 itself (without reading the request's body)
// and returns false. Call release when the connection ends.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, who parley.Identity, end func(error)) (release func(), ok bool) {
	release, err := s.tokens.Connect(who, s.opts.MaxConnsPerToken, end)
	if err != nil {
		s.refuse(w, r, err)
		return nil, false
	}
	return release, true
}

// connectStream is connect for a request whose answer is a stream (the
// chat endpoints): it returns the stream's context, which revoking the
// token ends (its cause says why), and done, to call when the stream
// ends.
func (s *Server) connectStream(w http.ResponseWriter, r *http.Request, who parley.Identity) (ctx context.Context, done func(), ok bool) {
	ctx, cut := context.WithCancelCause(r.Context())
	release, ok := s.connect(w, r, who, cut)
	if !ok {
		cut(nil)
		return nil, nil, false
	}
	return ctx, func() { release(); cut(nil) }, true
}

// connectReader is connect for a stream of the conversation the path names
// ({id}): it answers 404 for an unknown conversation and 403 for an agent
// that may not read it (before 429), and the stream of a delegate of the
// open turn is ended by end (forbidden) when that turn ends.
func (s *Server) connectReader(w http.ResponseWriter, r *http.Request, who parley.Identity, end func(error)) (release func(), ok bool) {
	release, err := s.eng.ConnectReader(r.Context(), who, s.opts.MaxConnsPerToken, r.PathValue("id"), end)
	if err != nil {
		writeErr(w, s.log, err)
		return nil, false
	}
	return release, true
}

// WatchTokens reads the tokens every TokenRecheck until ctx ends: the live
// connections of a token revoked elsewhere (parley token revoke on the
// file, another node) end, and an open server stops being open once a
// token exists (one made with the command line, say). A failed read is
// logged and tried again at the next tick.
func (s *Server) WatchTokens(ctx context.Context) {
	tick.Every(ctx, s.opts.TokenRecheck, func() {
		live, err := s.tokens.RecheckTokens(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("rechecking tokens", slog.Any("err", err))
			}
			return
		}
		if live > 0 {
			s.endOpen()
		}
	})
}

// endOpen makes an open server require tokens, and ends the connections
// it let in without one.
func (s *Server) endOpen() {
	if s.open.Swap(false) {
		s.log.Warn("a token exists: this server is no longer open and now requires tokens")
		s.tokens.EndConnections("", errOpenEnded)
	}
}

// closeCut ends a runner connection that was cut off: an error frame
// saying why, then the close.
func (s *Server) closeCut(c *wsconn.Conn, why error) {
	body := errorBody(why)
	body["type"] = "error"
	frame, _ := json.Marshal(body)
	if c.WriteText(frame) != nil {
		c.CloseNow()
		return
	}
	if parley.ErrorCode(why) == parley.EFORBIDDEN { // its agent was removed from the conversation
		c.Close(transport.StatusForbidden, "forbidden")
		return
	}
	c.Close(transport.StatusUnauthorized, "unauthorized")
}
