package api

import (
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// writeEndpoint is the shape of most write endpoints: decode the body T,
// resolve the actor from the token and the body's agent, run the command,
// and answer status with its result R (or the error).
func writeEndpoint[T, R any](s *Server, status int, agentOf func(*T) string, run func(r *http.Request, req *T, act conv.Actor) (R, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, who parley.Identity) {
		var req T
		if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
			writeErr(w, s.log, err)
			return
		}
		act, err := actor(who, agentOf(&req))
		if err != nil {
			writeErr(w, s.log, err)
			return
		}
		res, err := run(r, &req, act)
		if err != nil {
			writeErr(w, s.log, err)
			return
		}
		writeJSON(w, status, res)
	}
}
