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
	var req tokenRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	secret, t, err := s.eng.CreateToken(r.Context(), req.Kind, req.AgentID, req.Name)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if s.open.Swap(false) {
		s.log.Warn("a token was created: this server is no longer open and now requires tokens")
	}
	writeJSON(w, http.StatusCreated, createdToken{Secret: secret, Token: t})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if err := requireAdmin(who); err != nil {
		writeErr(w, s.log, err)
		return
	}
	ts, err := s.eng.ListTokens(r.Context())
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
	if err := s.eng.RevokeToken(r.Context(), r.PathValue("id")); err != nil {
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
