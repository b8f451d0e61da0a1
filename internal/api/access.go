package api

import (
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Who may do what is decided by the rules (conv/access.go) on the
// conversation's current state; these apply them to a request.

// readable checks that who may read the conversation named in the path
// ({id}): 404 for an unknown conversation (or an import in progress), 403
// for an agent that takes no part in it. A read of an empty page must never
// be mistaken for an empty conversation, so every read starts with it.
func (s *Server) readable(r *http.Request, who parley.Identity) error {
	return s.eng.Require(r.Context(), r.PathValue("id"), func(st conv.State) error { return st.CanRead(who) })
}

// takesPart checks that the actor takes part in conversation id (an admin
// acting as any agent does): what a runner must do to attach.
func (s *Server) takesPart(r *http.Request, id string, act conv.Actor) error {
	return s.eng.Require(r.Context(), id, func(st conv.State) error { return st.CanWrite(act) })
}
