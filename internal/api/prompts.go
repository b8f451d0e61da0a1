package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/transport"
)

// promptRequest is the body of a prompt.
type promptRequest struct{ parley.QueuePromptRequest }

func (p *promptRequest) writer() *string     { return &p.AgentID }
func (p *promptRequest) requestKey() *string { return &p.ClientRequestID }

// postPrompt queues a prompt for the conversation's runners. A retry with
// the same idempotency key (clientRequestId or Idempotency-Key) and body
// gets the original answer, and queues nothing.
func (s *Server) postPrompt(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	var req promptRequest
	act, key, ok := s.beginWrite(w, r, who, &req)
	if !ok {
		return
	}
	res, err := s.eng.EnqueuePrompt(r.Context(), r.PathValue("id"), conv.EnqueuePrompt{
		Actor: act, ID: req.ID, Content: req.Content, Mode: req.Mode, To: req.To, Channel: req.Channel,
		ClientRequestID: key, RequestHash: parley.RequestHash(&req)})
	s.created(w, err == nil && res.Replayed, res, err)
}

func (s *Server) listPrompts(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	err := s.readable(r, who)
	var q []parley.QueuedPrompt
	if err == nil {
		q, err = s.eng.Prompts(r.Context(), r.PathValue("id"))
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if q == nil {
		q = []parley.QueuedPrompt{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompts": q})
}

// promptCommand runs withdraw or promote on the prompt named in the path.
func (s *Server) promptCommand(run func(*Server, *http.Request, conv.Actor, string) (*engine.TurnResult, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, who parley.Identity) {
		var req parley.PromptActionRequest
		if r.ContentLength != 0 {
			if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
				writeErr(w, s.log, err)
				return
			}
		}
		act, err := actor(who, req.AgentID)
		if err != nil {
			writeErr(w, s.log, err)
			return
		}
		res, err := run(s, r, act, r.PathValue("pid"))
		if err != nil {
			writeErr(w, s.log, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

func withdraw(s *Server, r *http.Request, act conv.Actor, pid string) (*engine.TurnResult, error) {
	return s.eng.WithdrawPrompt(r.Context(), r.PathValue("id"), conv.WithdrawPrompt{Actor: act, ID: pid})
}

func promote(s *Server, r *http.Request, act conv.Actor, pid string) (*engine.TurnResult, error) {
	return s.eng.PromotePrompt(r.Context(), r.PathValue("id"), conv.PromotePrompt{Actor: act, ID: pid})
}

// abortResponse asks the runner answering the active prompt (or the prompt
// named, only if it is the one being answered) to stop, and says what it
// stopped.
func (s *Server) abortResponse(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot abort", who.Kind))
		return
	}
	var req parley.StopRequest
	if r.ContentLength != 0 {
		if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
			writeErr(w, s.log, err)
			return
		}
		if req.PromptID != "" && !parley.ValidID(req.PromptID) {
			writeErr(w, s.log, parley.Errorf(parley.EINVALIDVALUE, "promptId %q is not a valid prompt id", req.PromptID))
			return
		}
	}
	act := conv.Actor{AgentID: who.AgentID, Admin: who.CanManage()}
	if req.AgentID != "" {
		var err error
		if act, err = actor(who, req.AgentID); err != nil {
			writeErr(w, s.log, err)
			return
		}
	}
	st, err := s.runners.StopAnswer(r.Context(), r.PathValue("id"), act, req.PromptID)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"status": "aborting", "promptId": st.PromptID, "messageId": nullable(st.MessageID)})
}

// nullable is s, or JSON null when it is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// revert removes a message and everything after it, and tells the runners.
func (s *Server) revert(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeEndpoint(s, http.StatusOK, func(q *parley.RevertRequest) string { return q.AgentID }, func(r *http.Request, q *parley.RevertRequest, act conv.Actor) (*engine.RevertResult, error) {
		return s.runners.Revert(r.Context(), r.PathValue("id"), act, q.MessageID)
	})(w, r, who)
}

// MaxPromptWait bounds how long GET …/prompts/{pid}?wait= holds the request.
const MaxPromptWait = 60 * time.Second

// promptWait reads the wait query parameter: a duration ("30s", "1m",
// "500ms") or whole seconds ("30"), from 0 (the default: answer at once)
// to MaxPromptWait.
func promptWait(q url.Values) (time.Duration, error) {
	vs, ok := q["wait"]
	if !ok {
		return 0, nil
	}
	bad := func() error {
		return parley.Errorf(parley.EINVALIDVALUE, "wait must be given once, as a duration such as 30s or 500ms (or whole seconds) from 0 to %s, not %q",
			MaxPromptWait, strings.Join(vs, ","))
	}
	if len(vs) != 1 {
		return 0, bad()
	}
	v := vs[0]
	if wholeNumber(v) && len(v) <= 4 {
		v += "s"
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxPromptWait {
		return 0, bad()
	}
	return d, nil
}

// getPrompt answers where a prompt stands (see engine.PromptStatus), to
// whoever may read the conversation. With wait it holds the request until
// the prompt ends or the wait passes; a waiting request counts as one of
// the token's connections (Guards.MaxConnsPerToken), and revoking the
// token ends it.
func (s *Server) getPrompt(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	wait, err := promptWait(r.URL.Query())
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id, pid := r.PathValue("id"), r.PathValue("pid")
	if wait == 0 {
		var st *parley.PromptStatus
		if err = s.readable(r, who); err == nil {
			st, err = s.eng.PromptStatus(r.Context(), id, pid)
		}
		if err != nil {
			writeErr(w, s.log, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
		return
	}
	ctx, cut := context.WithCancelCause(r.Context())
	defer cut(nil)
	release, ok := s.connectReader(w, r, who, cut)
	if !ok {
		return
	}
	defer release()
	st, err := s.eng.WaitPrompt(ctx, id, pid, wait)
	if err != nil {
		writeErr(w, s.log, transport.CutOff(ctx, err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}
