package api

import (
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// ttl reads a claim's ttlMs against the longest claim the server allows
// (see claimTTL).
func (s *Server) ttl(ms int64) (time.Duration, error) {
	return claimTTL(ms, s.eng.Limits().MaxClaimTTL)
}

// claimTTL reads a claim's ttlMs: 0 (or left out) for the default, else 1
// to longest, in milliseconds. It is compared in milliseconds, before it
// becomes a Duration, so that no value wraps.
func claimTTL(ms int64, longest time.Duration) (time.Duration, error) {
	if max := longest.Milliseconds(); ms < 0 || ms > max {
		return 0, parley.Errorf(parley.EINVALIDVALUE, "ttlMs must be from 1 to %d (or 0 or left out for the default), not %d", max, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *Server) claimTurn(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeEndpoint(s, http.StatusOK, func(q *parley.ClaimTurnRequest) string { return q.AgentID }, func(r *http.Request, q *parley.ClaimTurnRequest, act conv.Actor) (*engine.TurnResult, error) {
		d, err := s.ttl(q.TTLMs)
		if err != nil {
			return nil, err
		}
		return s.eng.Claim(r.Context(), r.PathValue("id"), conv.ClaimTurn{Actor: act, ExpectTurn: q.ExpectTurn, TTL: d})
	})(w, r, who)
}

func (s *Server) resetTurn(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeEndpoint(s, http.StatusOK, func(q *parley.ResetTurnRequest) string { return q.AgentID }, func(r *http.Request, q *parley.ResetTurnRequest, act conv.Actor) (*engine.TurnResult, error) {
		d, err := s.ttl(q.TTLMs)
		if err != nil {
			return nil, err
		}
		return s.eng.Reset(r.Context(), r.PathValue("id"), conv.ResetTurn{Actor: act, Claim: q.Claim, TTL: d})
	})(w, r, who)
}

func (s *Server) abortTurn(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeEndpoint(s, http.StatusOK, func(q *parley.AbortTurnRequest) string { return q.AgentID }, func(r *http.Request, q *parley.AbortTurnRequest, act conv.Actor) (*engine.TurnResult, error) {
		return s.eng.AbortTurn(r.Context(), r.PathValue("id"), conv.AbortTurn{Actor: act, Reason: q.Reason})
	})(w, r, who)
}

func (s *Server) delegate(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeEndpoint(s, http.StatusOK, func(q *parley.DelegateRequest) string { return q.AgentID }, func(r *http.Request, q *parley.DelegateRequest, act conv.Actor) (*engine.TurnResult, error) {
		return s.eng.Delegate(r.Context(), r.PathValue("id"), conv.Delegate{Actor: act, To: q.To})
	})(w, r, who)
}
