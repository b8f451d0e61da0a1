package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/parleyhq/parley"
)

// StatusError is the SDK's one error type for what the server refused or
// reported: every call, stream and runner frame the server answers with an
// error returns one. Use errors.As to get it, or parley.ErrorCode(err) for
// the code alone (it unwraps to the *parley.Error):
//
//	var se *client.StatusError
//	if errors.As(err, &se) && se.Code() == parley.EBUSY { … se.Err.Details["queueLength"] … }
//
// An error that is not a StatusError (a network failure, a canceled
// context) did not come from the server.
type StatusError struct {
	// Status is the HTTP status of the answer (409, 404, …), or 0 for an
	// error the server sent in a frame: a runner's refused frame, or the
	// error frame that ends a stream or a runner connection.
	Status int
	// Err is the server's error: its Code (one of parley's E* constants),
	// its Message (what to do), its Head (with a 409 of the turn rules: the
	// conversation's head, to decide again without another request) and
	// its Details, every other field of the error body, decoded as
	// encoding/json decodes into an any (numbers are float64): queueLength
	// and maxQueueLength of a full prompt queue, maxStreaming,
	// maxMessageBytes, maxDepth, retryAfterSeconds.
	Err *parley.Error
	// RetryAfter is how long the server asks to wait before trying again
	// (a 429's Retry-After); 0 when it does not say.
	RetryAfter time.Duration
}

// Error implements error.
func (e *StatusError) Error() string {
	if e.Status == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Err.Error())
}

// Unwrap returns the *parley.Error, so that parley.ErrorCode works on it.
func (e *StatusError) Unwrap() error { return e.Err }

// Code is the server's error code, such as parley.ETURNCONFLICT.
func (e *StatusError) Code() string { return e.Err.Code }

// Message is the server's message: what went wrong and what to do.
func (e *StatusError) Message() string { return e.Err.Message }

// decodeError turns a non-2xx answer into a *StatusError. An answer that
// is not Parley's error body (a proxy's page, say) becomes an internal
// error that quotes it.
func decodeError(status int, header http.Header, data []byte) error {
	se := decodeErrorBody(data)
	if se == nil {
		se = &StatusError{Err: parley.Errorf(parley.EINTERNAL, "HTTP %d: %.200s", status, data)}
	}
	se.Status = status
	if secs, err := strconv.Atoi(header.Get("Retry-After")); err == nil && secs >= 0 {
		se.RetryAfter = time.Duration(secs) * time.Second
	}
	return se
}

// frameError turns an error frame the server sent ({"error": {…}}, on a
// stream or a runner connection) into a *StatusError with Status 0.
func frameError(data []byte) *StatusError {
	if se := decodeErrorBody(data); se != nil {
		return se
	}
	return &StatusError{Err: parley.Errorf(parley.EINTERNAL, "a malformed error frame: %.200s", data)}
}

// decodeErrorBody reads {"error": {code, message, head?, …details}}; nil
// if data is not that.
func decodeErrorBody(data []byte) *StatusError {
	var body struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil || body.Error == nil {
		return nil
	}
	e := &parley.Error{}
	if json.Unmarshal(body.Error["code"], &e.Code) != nil || e.Code == "" {
		return nil
	}
	_ = json.Unmarshal(body.Error["message"], &e.Message)
	if h, ok := body.Error["head"]; ok && string(h) != "null" {
		var head parley.Head
		if json.Unmarshal(h, &head) == nil {
			e.Head = &head
		}
	}
	for k, raw := range body.Error {
		if k == "code" || k == "message" || k == "head" {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) == nil {
			if e.Details == nil {
				e.Details = map[string]any{}
			}
			e.Details[k] = v
		}
	}
	se := &StatusError{Err: e}
	if secs, ok := e.Details["retryAfterSeconds"].(float64); ok && secs > 0 {
		se.RetryAfter = time.Duration(secs) * time.Second
	}
	return se
}
