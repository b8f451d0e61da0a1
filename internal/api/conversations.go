package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

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

// listConversations lists what who may read, most recently active first:
// an agent, the conversations it takes part in (whatever the filters
// say); admins and viewers, all. The filters narrow them: ?title= to the
// titles that contain it, ?participant= to those with that participant,
// ?involves= to those the agent takes part in, ?metadata.KEY=VALUE to
// those whose metadata has KEY with the string VALUE.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	q := r.URL.Query()
	limit, err := pageLimit(q)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	p, err := listFilters(q)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	p.Cursor, p.Limit, p.Title = q.Get("cursor"), limit, q.Get("title")
	views, next, err := s.conversationPage(r.Context(), who, p)
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

// metadataParam is the prefix of a list's metadata filters' parameters.
const metadataParam = "metadata."

// listFilters reads a list's participant, involves and metadata filters
// from q (their bounds are store.CheckListFilters'): each given once, an
// agent id not empty. Metadata filters come in the order of their keys.
func listFilters(q url.Values) (store.ListConversationsParams, error) {
	var p store.ListConversationsParams
	for _, f := range []struct {
		name string
		to   *string
	}{{"participant", &p.Participant}, {"involves", &p.Involves}} {
		vs, ok := q[f.name]
		switch {
		case !ok:
			continue
		case len(vs) > 1:
			return p, parley.Errorf(parley.EINVALIDVALUE, "%s is given %d times; at most once", f.name, len(vs))
		case vs[0] == "":
			return p, parley.Errorf(parley.EINVALIDVALUE, "%s needs an agent id", f.name)
		}
		*f.to = vs[0]
	}
	keys := make([]string, 0, len(q))
	for name := range q {
		if strings.HasPrefix(name, metadataParam) {
			keys = append(keys, name)
		}
	}
	if len(keys) > store.MaxMetadataFilters {
		return p, parley.Errorf(parley.EINVALIDVALUE, "%d metadata filters; at most %d", len(keys), store.MaxMetadataFilters)
	}
	slices.Sort(keys)
	for _, name := range keys {
		if vs := q[name]; len(vs) > 1 {
			return p, parley.Errorf(parley.EINVALIDVALUE, "%s is given %d times; at most once", name, len(vs))
		}
		p.Metadata = append(p.Metadata, store.MetadataFilter{Key: strings.TrimPrefix(name, metadataParam), Value: q.Get(name)})
	}
	return p, nil
}

// conversationPage lists a page of the conversations who may read, as p
// filters them (see listConversations): an agent sees only those it takes
// part in, and the page is bounded in bytes (by p.MaxBytes when it is
// less than the server's bound). The MCP tool
// list_conversations lists through it too.
func (s *Server) conversationPage(ctx context.Context, who parley.Identity, p store.ListConversationsParams) ([]*engine.View, string, error) {
	if err := store.CheckListFilters(p); err != nil {
		return nil, "", err
	}
	if who.Kind == parley.TokenAgent {
		p.Member = who.AgentID
	}
	if p.MaxBytes <= 0 || p.MaxBytes > s.opts.PageBytes {
		p.MaxBytes = s.opts.PageBytes
	}
	return s.eng.ListConversations(ctx, p)
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
