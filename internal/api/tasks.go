package api

import (
	"net/http"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
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
	writeEndpoint(s, http.StatusCreated, func(q *taskRequest) string { return q.AgentID }, func(r *http.Request, q *taskRequest, act conv.Actor) (*parley.Task, error) {
		// A prompt over the text limit is too large, as for POST …/prompts.
		if max := s.eng.Limits().MaxTextBytes; len(q.Prompt) > max {
			return nil, parley.Errorf(parley.ETOOLARGE, "the prompt is %d bytes; the limit is %d", len(q.Prompt), max)
		}
		// A task queues prompts as its agent: that agent must take part.
		if q.ConversationID != "" && parley.ValidID(q.ConversationID) {
			if err := s.takesPart(r, q.ConversationID, act); err != nil {
				return nil, err
			}
		}
		return s.eng.CreateTask(r.Context(), parley.Task{ID: q.ID, ConversationID: q.ConversationID, AgentID: act.AgentID,
			Prompt: q.Prompt, Cron: q.Cron, EveryMs: q.EveryMs})
	})(w, r, who)
}

// listTasks lists the tasks who may see: an agent, its own; admins and
// viewers, all.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	ts, err := s.eng.Tasks(r.Context())
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if who.Kind == parley.TokenAgent {
		ts = slices.DeleteFunc(ts, func(t *parley.Task) bool { return t.AgentID != who.AgentID })
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
	// A task is its agent's: it, the conversation's owner or an admin removes it.
	act := conv.Actor{AgentID: who.AgentID, Admin: who.CanManage()}
	t, err := s.rd.Task(r.Context(), r.PathValue("id"))
	if err == nil {
		err = s.eng.Require(r.Context(), t.ConversationID, func(st conv.State) error {
			if !st.CanManage(act, t.AgentID) {
				return parley.Errorf(parley.EFORBIDDEN, "task %s is %s's; only it, the conversation's owner or an admin may delete it", t.ID, t.AgentID)
			}
			return nil
		})
	}
	if err == nil {
		err = s.eng.DeleteTask(r.Context(), t.ID)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
