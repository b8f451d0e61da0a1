package api

import (
	"net/http"
	"strconv"

	"github.com/parleyhq/parley"
)

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot create conversations", who.Kind))
		return
	}
	var req createConversationRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	createdBy := who.AgentID
	if createdBy == "" {
		createdBy = string(who.Kind)
	}
	v, err := s.eng.CreateConversation(r.Context(), parley.Conversation{
		ID: req.ID, Title: req.Title, Participants: req.Participants, TurnPolicy: req.TurnPolicy,
		MessageFormat: req.MessageFormat, Metadata: req.Metadata, CreatedBy: createdBy,
	})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	w.Header().Set("Location", "/v1/conversations/"+v.Conversation.ID)
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request, _ parley.Identity) {
	q := r.URL.Query()
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeErr(w, s.log, parley.Errorf(parley.EINVALID, "limit must be a whole number from 1 to 1000, not %q", l))
			return
		}
		limit = n
	}
	views, next, err := s.eng.ListConversations(r.Context(), q.Get("cursor"), limit)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	body := map[string]any{"conversations": views}
	if next != "" {
		body["nextCursor"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request, _ parley.Identity) {
	v, err := s.eng.Conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
