package api

import (
	"net/http"

	"github.com/parleyhq/parley"
)

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if err := requireAdmin(who); err != nil {
		writeErr(w, s.log, err)
		return
	}
	var req parley.CreateTokenRequest
	if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	secret, t, err := s.tokens.CreateToken(r.Context(), req.Kind, req.AgentID, req.Name)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	s.endOpen()
	writeJSON(w, http.StatusCreated, createdToken{Secret: secret, Token: t})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if err := requireAdmin(who); err != nil {
		writeErr(w, s.log, err)
		return
	}
	ts, err := s.tokens.ListTokens(r.Context())
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if ts == nil {
		ts = []*parley.Token{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ts})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if err := requireAdmin(who); err != nil {
		writeErr(w, s.log, err)
		return
	}
	if err := s.tokens.RevokeToken(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// createdToken is a new token with its secret, shown this once.
type createdToken struct {
	Secret string `json:"token"`
	*parley.Token
}

// whoami answers who the request acts as: the token's kind and, for an
// agent token, its agent; open is true on a server running without tokens
// (every request acts as an admin); cookie is true when the request was
// signed in by the web UI's session cookie. A client shows it, and what it
// may do.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeJSON(w, http.StatusOK, identityBody(who, byCookie(r)))
}
