package api

import (
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot create conversations", who.Kind))
		return
	}
	var req parley.CreateConversationRequest
	if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	createdBy := who.AgentID
	if createdBy == "" {
		createdBy = string(who.Kind)
	}
	v, err := s.eng.CreateConversation(r.Context(), parley.Conversation{
		ID: req.ID, Title: req.Title, Participants: req.Participants, Members: req.Members, TurnPolicy: req.TurnPolicy,
		MessageFormat: req.MessageFormat, Metadata: req.Metadata, CreatedBy: createdBy, TurnLeaseMs: req.TurnLeaseMs,
	})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	w.Header().Set("Location", "/v1/conversations/"+v.Conversation.ID)
	writeJSON(w, http.StatusCreated, v)
}

// listConversations lists what who may read: an agent, the conversations
// it takes part in; admins and viewers, all; ?title= narrows them to the
// titles that contain it.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	q := r.URL.Query()
	limit, err := pageLimit(q)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	member := ""
	if who.Kind == parley.TokenAgent {
		member = who.AgentID
	}
	views, next, err := s.eng.ListConversations(r.Context(), store.ListConversationsParams{Member: member, Cursor: q.Get("cursor"), Limit: limit, Title: q.Get("title"), MaxBytes: s.opts.PageBytes})
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

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	err := s.readable(r, who)
	var v *engine.View
	if err == nil {
		v, err = s.eng.Conversation(r.Context(), r.PathValue("id"))
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// deleteConversation serves DELETE /v1/conversations/{id}: admins only. The
// conversation goes with everything in it; its streams and runners are
// told and closed.
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanManage() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "only an admin token may delete a conversation"))
		return
	}
	if err := s.eng.DeleteConversation(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
