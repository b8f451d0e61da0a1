package api

import (
	"context"
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/transport"
)

// A conversation's stream, over Server-Sent Events or WebSocket: the
// handlers check who may read it and make its follower; package transport
// writes it from there on.

// streamSSE serves a conversation as Server-Sent Events (see
// transport.Streams.SSE).
func (s *Server) streamSSE(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	from, err := transport.Position(r)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id := r.PathValue("id")
	// The stream has its own context, which revoking the token (or the end
	// of a delegate's turn) ends, with an error frame.
	ctx, cut := context.WithCancelCause(context.Background())
	release, ok := s.connectReader(w, r, who, cut)
	if !ok {
		cut(nil)
		return
	}
	done := func() { cut(nil); release() }
	sub, err := s.eng.Follow(r.Context(), id, from)
	if err != nil {
		done()
		writeErr(w, s.log, err)
		return
	}
	if err := s.streams.SSE(ctx, w, r, id, sub, func() { cut(nil) }, done); err != nil {
		writeErr(w, s.log, err)
	}
}

// streamWS serves a conversation over WebSocket (see
// transport.Streams.WS).
func (s *Server) streamWS(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	from, err := transport.Position(r)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id := r.PathValue("id")
	// The stream outlives the handshake's request, so it has its own
	// context, ended when the client goes away. Revoking the token (or the
	// end of a delegate's turn) ends the stream (not the reads, so that the
	// error frame and the close still go out).
	ctx, cancel := context.WithCancel(context.Background())
	pctx, cut := context.WithCancelCause(ctx)
	release, ok := s.connectReader(w, r, who, cut)
	if !ok {
		cancel()
		return
	}
	sub, err := s.eng.Follow(ctx, id, from)
	if err == nil {
		err = s.streams.WS(pctx, w, r, id, sub, cancel, func() { cut(nil); cancel(); release() })
	} else {
		release()
		cancel()
	}
	if err != nil {
		writeErr(w, s.log, err)
	}
}
