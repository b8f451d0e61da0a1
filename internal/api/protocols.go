package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/protocols"
)

// protocolHost lends the protocols' adapters (package protocols) the
// server's plumbing: its error answers, its body reading, its bookkeeping
// of connections and its quotas.
type protocolHost struct{ s *Server }

// WriteError implements protocols.Host.
func (h protocolHost) WriteError(w http.ResponseWriter, err error) { writeErr(w, h.s.log, err) }

// Refuse implements protocols.Host.
func (h protocolHost) Refuse(w http.ResponseWriter, r *http.Request, err error) {
	h.s.refuse(w, r, err)
}

// DecodeBody implements protocols.Host.
func (h protocolHost) DecodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	return h.s.decodeBody(w, r, max, v)
}

// ConnectStream implements protocols.Host.
func (h protocolHost) ConnectStream(w http.ResponseWriter, r *http.Request, who parley.Identity) (context.Context, func(), bool) {
	return h.s.connectStream(w, r, who)
}

// ConnectReader implements protocols.Host.
func (h protocolHost) ConnectReader(w http.ResponseWriter, r *http.Request, who parley.Identity, end func(error)) (func(), bool) {
	return h.s.connectReader(w, r, who, end)
}

// Readable implements protocols.Host.
func (h protocolHost) Readable(r *http.Request, who parley.Identity) error {
	return h.s.readable(r, who)
}

// Actor implements protocols.Host.
func (protocolHost) Actor(who parley.Identity, bodyAgent string) (conv.Actor, error) {
	return actor(who, bodyAgent)
}

// AllowCreate implements protocols.Host.
func (h protocolHost) AllowCreate(who parley.Identity) error { return h.s.creates.allow(who) }

// Inputs implements protocols.Host: the requests the conversation's state
// holds (pending, ended and not yet taken by their asker, and the last that
// ended), each with its part as its message holds it.
func (h protocolHost) Inputs(ctx context.Context, id string, parts bool) ([]protocols.Input, error) {
	var list []protocols.Input
	err := h.s.eng.Require(ctx, id, func(st conv.State) error {
		for _, e := range st.InputsEnded {
			list = append(list, protocols.Input{RequestID: e.RequestID, MessageID: e.MessageID, Status: e.Status})
		}
		for _, rid := range st.InputIDs() {
			in := st.Inputs[rid]
			list = append(list, protocols.Input{RequestID: rid, MessageID: in.MessageID, Kind: in.Kind, Status: in.Status})
		}
		return nil
	})
	if err != nil || !parts {
		return list, err
	}
	read := map[string]*parley.Message{}
	for i := range list {
		in := &list[i]
		m, ok := read[in.MessageID]
		if !ok {
			m, err = h.s.rd.Message(ctx, id, in.MessageID)
			if err != nil && parley.ErrorCode(err) != parley.ENOTFOUND {
				return nil, err
			}
			read[in.MessageID] = m // nil: removed meanwhile
		}
		if m == nil {
			continue
		}
		if found, ok := inputOf(m, in.RequestID); ok {
			in.Part, in.Kind, in.ToolCallID = found.Part, found.Kind, found.ToolCallID
		}
	}
	return list, nil
}

// AnswerInput implements protocols.Host.
func (h protocolHost) AnswerInput(ctx context.Context, act conv.Actor, id, requestID string, answer json.RawMessage) error {
	_, err := h.s.AnswerInput(ctx, id, requestID, answer, act)
	return err
}
