package api

import (
	"bytes"
	"context"
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// Input requests: what agents ask a person (see parley.InputRequest).

// answerInput answers POST /v1/conversations/{id}/inputs/{rid}.
func (s *Server) answerInput(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	writeEndpoint(s, http.StatusOK, func(q *parley.AnswerInputRequest) string { return q.AgentID }, func(r *http.Request, q *parley.AnswerInputRequest, act conv.Actor) (*parley.AnswerInputResult, error) {
		return s.AnswerInput(r.Context(), r.PathValue("id"), r.PathValue("rid"), q.Answer, act)
	})(w, r, who)
}

// AnswerInput answers an input request as act and returns it as it now is.
// The chat protocols answer through it too.
func (s *Server) AnswerInput(ctx context.Context, id, requestID string, answer []byte, act conv.Actor) (*parley.AnswerInputResult, error) {
	if !parley.ValidID(requestID) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "requestId %q is not a valid id", requestID)
	}
	if len(bytes.TrimSpace(answer)) == 0 || string(bytes.TrimSpace(answer)) == "null" {
		return nil, parley.Errorf(parley.EINVALID, "the body needs an answer: {\"answer\": …}")
	}
	res, err := s.eng.AnswerInput(ctx, id, conv.AnswerInput{Actor: act, RequestID: requestID, Answer: answer})
	if err != nil {
		return nil, err
	}
	m := res.Message
	if m == nil {
		if m, err = s.rd.Message(ctx, id, res.MessageID); err != nil {
			return nil, err
		}
	}
	in, ok := inputOf(m, requestID)
	if !ok {
		return nil, parley.Errorf(parley.ENOTFOUND, "input request %s is no longer in message %s", requestID, res.MessageID)
	}
	return &parley.AnswerInputResult{Input: in, Seq: res.Seq}, nil
}

// listInputs answers GET /v1/conversations/{id}/inputs: the requests
// pending (status=pending, the default), or all those still held: pending,
// and ended but not yet taken by the runner that asked (status=open).
func (s *Server) listInputs(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	id := r.PathValue("id")
	status := r.URL.Query().Get("status")
	if status != "" && status != parley.InputStatusPending && status != "open" {
		writeErr(w, s.log, parley.Errorf(parley.EINVALIDVALUE, "status %q is not one of pending, open", status))
		return
	}
	type held struct{ request, message string }
	var list []held
	err := s.eng.Require(r.Context(), id, func(st conv.State) error {
		if err := st.CanRead(who); err != nil {
			return err
		}
		for _, rid := range st.InputIDs() {
			in := st.Inputs[rid]
			if status == "open" || in.Status == parley.InputStatusPending {
				list = append(list, held{rid, in.MessageID})
			}
		}
		return nil
	})
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	out := parley.InputList{Inputs: []parley.Input{}}
	read := map[string]*parley.Message{}
	for _, h := range list {
		m, ok := read[h.message]
		if !ok {
			m, err = s.rd.Message(r.Context(), id, h.message)
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				m, err = nil, nil // removed meanwhile
			}
			if err != nil {
				writeErr(w, s.log, err)
				return
			}
			read[h.message] = m
		}
		if m == nil {
			continue
		}
		if in, ok := inputOf(m, h.request); ok {
			out.Inputs = append(out.Inputs, in)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// inputOf returns request id of message m as readers list it.
func inputOf(m *parley.Message, id string) (parley.Input, bool) {
	for _, p := range m.Parts {
		if p.Type == parley.PartInputRequest && p.RequestID == id {
			return parley.Input{ConversationID: m.ConversationID, MessageID: m.ID, AgentID: m.AgentID, Part: p}, true
		}
	}
	return parley.Input{}, false
}
