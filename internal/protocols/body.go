package protocols

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
)

// The body of both protocols' requests is the whole chat: every message,
// each time, of which only the last (the question) is kept.

// MaxChatBodyBytes bounds the body of POST /v1/chat and POST /v1/ag-ui:
// it carries the whole chat's messages, of which only the last is kept
// (and bounded as every prompt is).
const MaxChatBodyBytes = 16 << 20

// readBody reads a protocol's request body into v: one JSON object of at
// most MaxChatBodyBytes, read as the API reads every body (Host.DecodeBody).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	return s.host.DecodeBody(w, r, MaxChatBodyBytes, v)
}

// message is a protocol's message as far as a prompt needs it.
type message interface {
	// about names the messages in errors: plural, and one with its shape.
	about() (plural, one string)
}

// lastOf decodes a JSON array of messages one at a time, keeping only the
// last: a long chat sends every message each time, and only the last is
// asked.
type lastOf[M message] struct {
	last  *M
	count int
}

// UnmarshalJSON implements json.Unmarshaler.
func (l *lastOf[M]) UnmarshalJSON(data []byte) error {
	var zero M
	plural, one := zero.about()
	dec := json.NewDecoder(bytes.NewReader(data)) // no copy: the body is large
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return parley.Errorf(parley.EINVALID, "messages must be an array of %s", plural)
	}
	for dec.More() {
		var m M
		if err := dec.Decode(&m); err != nil {
			return parley.Errorf(parley.EINVALID, "messages[%d] is not %s: %s", l.count, one, strings.TrimPrefix(err.Error(), "json: "))
		}
		l.last = &m
		l.count++
	}
	return nil
}
