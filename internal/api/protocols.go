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

// Inputs implements protocols.Host.
func (h protocolHost) Inputs(ctx context.Context, id string) ([]protocols.Input, error) {
	return nil, nil
}

// AnswerInput implements protocols.Host.
func (h protocolHost) AnswerInput(ctx context.Context, who parley.Identity, act conv.Actor, id, requestID string, answer json.RawMessage) error {
	return parley.Errorf(parley.ENOTFOUND, "input request %s is not in conversation %s", requestID, id)
}
