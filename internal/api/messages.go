package api

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
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
		Metadata: req.Metadata, ClientRequestID: key, RequestHash: requestHash(&req), NeedsContent: true,
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
		Precondition: req.Precondition, ClientRequestID: key, RequestHash: requestHash(&req),
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
	if len(items) > 0 && (len(items) == limit || sizeOf(items) >= budget) {
		body["nextAfter"] = seqOf(items[len(items)-1])
	}
	writeJSON(w, http.StatusOK, body)
}

// sizeOf is about what items take in JSON, as the store counts a page
// (an event's data; a message row); it errs on the large side, so that a
// page is never mistaken for the last.
func sizeOf[T any](items []T) int {
	n := 0
	for _, it := range items {
		if e, ok := any(it).(parley.Event); ok {
			n += len(e.Data)
			continue
		}
		b, _ := json.Marshal(it)
		n += len(b)
	}
	return n
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
	ms, err := s.eng.Store().ListMessages(r.Context(), store.ListMessagesParams{
		ConversationID: r.PathValue("id"), After: after, Limit: limit, TurnID: q.Get("turnId"), AgentID: q.Get("agentId"), MaxBytes: s.opts.PageBytes,
	})
	if err == nil {
		err = s.eng.Readable(r.Context(), r.PathValue("id"), ms)
	}
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
		m, err = s.eng.StreamingMessage(r.Context(), r.PathValue("id"), r.PathValue("mid"))
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
	if err == nil {
		_, err = s.eng.Store().MessageKey(r.Context(), r.PathValue("id"), r.PathValue("mid")) // not its row
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	ms, err := s.eng.Store().ListReplies(r.Context(), store.ListRepliesParams{
		ConversationID: r.PathValue("id"), MessageID: r.PathValue("mid"), After: after, Limit: limit, MaxBytes: s.opts.PageBytes,
	})
	if err == nil {
		err = s.eng.Readable(r.Context(), r.PathValue("id"), ms)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writePage(w, "messages", ms, limit, s.opts.PageBytes, messageSeq)
}

// maxThread bounds the ancestors and the descendants a thread view
// returns (a page of descendants).
const maxThread = 1000

// maxSummarized is how many ancestors of a thread view may be shown whole
// at the most size each: one over PageBytes/maxSummarized is summarized.
const maxSummarized = 64

// anc0 is a thread's root: its first ancestor, or the message itself.
func anc0(anc []*parley.Message, m *parley.Message) *parley.Message {
	if len(anc) > 0 {
		return anc[0]
	}
	return m
}

// getThread serves a message with its ancestors and a page of its
// descendants (?after=SEQ for the next), each bounded in bytes before it
// is read from the store: the nearest ancestors whole while they hold
// about PageBytes, each at most PageBytes/maxSummarized, the others
// summarized; descendants up to about PageBytes, then nextAfter.
func (s *Server) getThread(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	ctx, id, mid := r.Context(), r.PathValue("id"), r.PathValue("mid")
	after, err := queryInt(r.URL.Query(), "after", 0, 0, math.MaxInt64)
	if err == nil {
		err = s.readable(r, who)
	}
	var m *parley.Message
	if err == nil {
		m, err = s.eng.Store().GetMessage(ctx, id, mid)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	whole := s.opts.PageBytes / maxSummarized
	anc, err := s.eng.Store().Ancestors(ctx, store.ThreadParams{ConversationID: id, MessageID: mid, Limit: maxThread + 1, MaxBytes: s.opts.PageBytes, SummarizeOver: whole})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	truncated := len(anc) > maxThread // the furthest are left out: ask for the thread of the first shown
	if truncated {
		anc = anc[1:]
	}
	desc, err := s.eng.Store().Descendants(ctx, store.ThreadParams{ConversationID: id, MessageID: mid, After: after, Limit: maxThread + 1, MaxBytes: s.opts.PageBytes})
	if err == nil {
		// Streaming messages are shown assembled, wherever they stand (a
		// summary says to fetch the message, which assembles it).
		all := append(append([]*parley.Message{m}, anc...), desc...)
		shown := slices.DeleteFunc(slices.Clone(all), func(m *parley.Message) bool { return m.Summarized != nil })
		err = s.eng.Readable(ctx, id, shown)
		for i, j := 0, 0; i < len(all); i++ {
			if all[i].Summarized == nil {
				all[i], j = shown[j], j+1
			}
		}
		m, anc, desc = all[0], all[1:1+len(anc)], all[1+len(anc):]
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	// An ancestor assembled from its chunks may have grown past the bound.
	for i, a := range anc {
		if a.Summarized == nil && a.Status == parley.StatusStreaming {
			if n := sizeOf([]*parley.Message{a}); n > whole {
				anc[i] = a.Summarize(n)
			}
		}
	}
	body := map[string]any{"root": anc0(anc, m), "ancestors": anc, "message": m}
	if len(desc) > maxThread || len(desc) > 0 && sizeOf(desc) >= s.opts.PageBytes {
		desc = desc[:min(len(desc), maxThread)]
		body["nextAfter"] = desc[len(desc)-1].Seq
		truncated = true
	}
	body["descendants"], body["truncated"] = desc, truncated
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
	es, err := s.eng.Store().ReadEvents(r.Context(), store.ReadEventsParams{ConversationID: r.PathValue("id"), After: after, Limit: limit, MaxBytes: s.opts.PageBytes})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writePage(w, "events", es, limit, s.opts.PageBytes, func(e parley.Event) int64 { return e.Seq })
}
