package api

import (
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/connlimit"
	"github.com/parleyhq/parley/internal/conv"
)

// handler is an endpoint that knows who is asking.
type handler func(w http.ResponseWriter, r *http.Request, who parley.Identity)

// authed resolves the bearer token (header, or ?token= for browsers'
// EventSource and WebSocket, or else the web UI's session cookie) into an
// identity. Without a token the request is refused, unless the server runs
// open (which ignores the cookie). A request signed in by the cookie must
// also pass checkCookieRequest.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret := ""
		if a := r.Header.Get("Authorization"); a != "" {
			scheme, rest, ok := strings.Cut(a, " ")
			secret = strings.TrimSpace(rest)
			if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
				s.refuse(w, r, parley.Errorf(parley.EUNAUTHORIZED, "the Authorization header must be \"Bearer <token>\""))
				return
			}
		} else if t := r.URL.Query().Get("token"); t != "" {
			secret = t
		} else if c := cookieSecret(r); c != "" && !s.open.Load() {
			// An open server has no token a cookie could hold (one left by
			// another server at this address): it is ignored there.
			if err := checkCookieRequest(r, c); err != nil {
				s.refuse(w, r, err)
				return
			}
			secret, r = c, withCookie(r)
		}
		if secret == "" {
			if !s.open.Load() {
				s.refuse(w, r, parley.Errorf(parley.EUNAUTHORIZED, "a bearer token is required: send \"Authorization: Bearer <token>\""))
				return
			}
			if err := s.checkOpen(r); err != nil {
				s.refuse(w, r, err)
				return
			}
			h(w, r, parley.Identity{Kind: parley.TokenAdmin, Open: true})
			return
		}
		who, err := s.tokens.Authenticate(r.Context(), secret)
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		// Its connection, idle, is closed to make room only once no
		// unknown client's is left.
		connlimit.Known(r.Context())
		h(w, r, who)
	}
}

// actor decides who a write acts as. An agent token acts as its agent and
// may not name another; an admin (or an open server) acts as the agent the
// body names; a viewer may not write.
func actor(who parley.Identity, bodyAgent string) (conv.Actor, error) {
	switch who.Kind {
	case parley.TokenAgent:
		if bodyAgent != "" && bodyAgent != who.AgentID {
			return conv.Actor{}, parley.Errorf(parley.EFORBIDDEN, "this token belongs to agent %s; it cannot write as %s", who.AgentID, bodyAgent)
		}
		return conv.Actor{AgentID: who.AgentID}, nil
	case parley.TokenAdmin:
		if bodyAgent == "" {
			return conv.Actor{}, parley.Errorf(parley.EINVALIDVALUE, "agentId is required: an admin token (or an open server) writes as the agent the body names")
		}
		if !parley.ValidID(bodyAgent) {
			return conv.Actor{}, parley.Errorf(parley.EINVALIDVALUE, "agentId %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", bodyAgent)
		}
		return conv.Actor{AgentID: bodyAgent, Admin: true}, nil
	}
	return conv.Actor{}, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot write", who.Kind)
}

// requireAdmin refuses anyone but an admin (or an open server).
func requireAdmin(who parley.Identity) error {
	if who.Kind != parley.TokenAdmin {
		return parley.Errorf(parley.EFORBIDDEN, "only an admin token may manage tokens")
	}
	return nil
}
