package api

import (
	"net/http"

	"github.com/parleyhq/parley"
)

type taskRequest struct {
	ID             string `json:"id,omitempty"`
	ConversationID string `json:"conversationId"`
	AgentID        string `json:"agentId,omitempty"`
	Prompt         string `json:"prompt"`
	Cron           string `json:"cron,omitempty"`
	EveryMs        int64  `json:"everyMs,omitempty"`
}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	var req taskRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	act, err := actor(who, req.AgentID)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	t, err := s.eng.CreateTask(r.Context(), parley.Task{ID: req.ID, ConversationID: req.ConversationID, AgentID: act.AgentID,
		Prompt: req.Prompt, Cron: req.Cron, EveryMs: req.EveryMs})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, _ parley.Identity) {
	ts, err := s.eng.Tasks(r.Context())
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if ts == nil {
		ts = []*parley.Task{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": ts})
}

func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot delete tasks", who.Kind))
		return
	}
	if err := s.eng.DeleteTask(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
