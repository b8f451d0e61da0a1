package api

import (
	"math"
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// writeRequest is a body that writes to a conversation as an agent and may
// carry a client request id.
type writeRequest interface {
	writer() *string
	requestKey() *string
}

func (m *messageRequest) writer() *string     { return &m.AgentID }
func (m *messageRequest) requestKey() *string { return &m.ClientRequestID }
func (e *eventRequest) writer() *string       { return &e.AgentID }
func (e *eventRequest) requestKey() *string   { return &e.ClientRequestID }

// beginWrite decodes a write's body, resolves who writes, and takes the
// idempotency key (body or Idempotency-Key header) out of the body. It
// writes the actor's id into the body, so that an agent naming itself and
// one that does not send the same request. On error it has answered the
// request and returns ok false.
func (s *Server) beginWrite(w http.ResponseWriter, r *http.Request, who parley.Identity, req writeRequest) (act conv.Actor, key string, ok bool) {
	err := s.decodeBody(w, r, s.opts.MaxBodyBytes, req)
	if err == nil {
		act, err = actor(who, *req.writer())
	}
	if err == nil {
		key, err = clientRequestID(r, *req.requestKey())
	}
	if err != nil {
		writeErr(w, s.log, err)
		return act, "", false
	}
	*req.requestKey() = ""
	*req.writer() = act.AgentID
	return act, key, true
}

// created answers a write: 201, marked when it replays an earlier answer.
func (s *Server) created(w http.ResponseWriter, replayed bool, res any, err error) {
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, res)
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	var req messageRequest
	act, key, ok := s.beginWrite(w, r, who, &req)
	if !ok {
		return
	}
	parts, err := req.parts()
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if req.Role == "" {
		req.Role = parley.RoleAssistant
	}
	res, err := s.eng.PostMessage(r.Context(), r.PathValue("id"), conv.PostMessage{
		Actor: act, ID: req.ID, Role: req.Role, Parts: parts, ReplyTo: req.ReplyTo, TurnID: req.TurnID,
		Finality: req.Finality, Next: req.Next, Precondition: req.Precondition, Channel: req.Channel,
		Metadata: req.Metadata, ClientRequestID: key, RequestHash: parley.RequestHash(&req), NeedsContent: true,
	})
	s.created(w, err == nil && res.Replayed, res, err)
}

func (s *Server) postEvent(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	var req eventRequest
	act, key, ok := s.beginWrite(w, r, who, &req)
	if !ok {
		return
	}
	switch {
	case req.Type != parley.EventTrace:
		writeErr(w, s.log, parley.Errorf(parley.EINVALIDVALUE, "type %q cannot be posted; post \"trace\" here and messages to …/messages", req.Type))
		return
	case req.ID != "" && !parley.ValidID(req.ID):
		writeErr(w, s.log, parley.Errorf(parley.EINVALIDVALUE, "id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", req.ID))
		return
	}
	res, err := s.eng.PostTrace(r.Context(), r.PathValue("id"), conv.PostTrace{
		Actor: act, ID: req.ID, Payload: req.Payload, TurnID: req.TurnID, Finality: req.Finality,
		Precondition: req.Precondition, ClientRequestID: key, RequestHash: parley.RequestHash(&req),
	})
	s.created(w, err == nil && res.Replayed, res, err)
}

// writePage answers a list with where to continue when the page is full,
// by count or by size (a page the store ended at budget bytes).
func writePage[T any](w http.ResponseWriter, key string, items []T, limit, budget int, seqOf func(T) int64) {
	if items == nil {
		items = []T{}
	}
	body := map[string]any{key: items}
	if reads.PageFull(items, limit, budget) {
		body["nextAfter"] = seqOf(items[len(items)-1])
	}
	writeJSON(w, http.StatusOK, body)
}

func messageSeq(m *parley.Message) int64 { return m.Seq }

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	after, limit, err := page(r)
	if err == nil {
		err = s.readable(r, who)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	q := r.URL.Query()
	ms, err := s.rd.Messages(r.Context(), store.ListMessagesParams{
		ConversationID: r.PathValue("id"), After: after, Limit: limit, TurnID: q.Get("turnId"), AgentID: q.Get("agentId"), MaxBytes: s.opts.PageBytes,
	})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writePage(w, "messages", ms, limit, s.opts.PageBytes, messageSeq)
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	// A streaming message is its row plus the chunks after it.
	err := s.readable(r, who)
	var m *parley.Message
	if err == nil {
		m, err = s.rd.Message(r.Context(), r.PathValue("id"), r.PathValue("mid"))
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) listReplies(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	after, limit, err := page(r)
	if err == nil {
		err = s.readable(r, who) // an import in progress has rows, and is not known
	}
	var ms []*parley.Message
	if err == nil {
		ms, err = s.rd.Replies(r.Context(), store.ListRepliesParams{
			ConversationID: r.PathValue("id"), MessageID: r.PathValue("mid"), After: after, Limit: limit, MaxBytes: s.opts.PageBytes,
		})
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writePage(w, "messages", ms, limit, s.opts.PageBytes, messageSeq)
}

// getThread serves a message with its ancestors and a page of its
// descendants (?after=SEQ for the next), each bounded in bytes
// (reads.Reader.Thread).
func (s *Server) getThread(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	after, err := queryInt(r.URL.Query(), "after", 0, 0, math.MaxInt64)
	if err == nil {
		err = s.readable(r, who)
	}
	var t *reads.Thread
	if err == nil {
		t, err = s.rd.Thread(r.Context(), r.PathValue("id"), r.PathValue("mid"), after, s.opts.PageBytes)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	body := map[string]any{"root": t.Root, "ancestors": t.Ancestors, "message": t.Message, "descendants": t.Descendants, "truncated": t.Truncated}
	if t.NextAfter != 0 {
		body["nextAfter"] = t.NextAfter
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	after, limit, err := page(r)
	if err == nil {
		err = s.readable(r, who)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	es, err := s.rd.Events(r.Context(), store.ReadEventsParams{ConversationID: r.PathValue("id"), After: after, Limit: limit, MaxBytes: s.opts.PageBytes})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writePage(w, "events", es, limit, s.opts.PageBytes, func(e parley.Event) int64 { return e.Seq })
}
