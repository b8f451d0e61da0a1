package parley

import (
	"errors"
	"fmt"
)

// Error codes. Each is the code a client sees in {"error": {"code": ...}}; the
// api package maps each one to an HTTP status in one place.
const (
	EINVALID       = "invalid_request"      // 400: malformed input
	EUNAUTHORIZED  = "unauthorized"         // 401: no or unknown token
	EFORBIDDEN     = "forbidden"            // 403: the token may not do this
	ENOTFOUND      = "not_found"            // 404: unknown conversation, message, token
	ETURNCONFLICT  = "turn_conflict"        // 409: another agent owns the open turn, or there is none
	EPRECONDITION  = "precondition_failed"  // 409: {expectTurn, startingTurn} does not hold
	ECLAIMCONFLICT = "claim_conflict"       // 409: another agent holds the claim
	ECLOSED        = "conversation_closed"  // 409: the conversation is closed
	EBUSY          = "busy"                 // 409: the resource is busy or already exists
	ENOTANSWERING  = "not_answering"        // 409: a stop names a prompt that is not being answered
	EINPUTENDED    = "input_ended"          // 409: an input request answered otherwise, expired or canceled
	ETOOLARGE      = "too_large"            // 413: a body or a value over its bound
	EINVALIDTHREAD = "invalid_thread"       // 422: replyTo breaks the threading rules
	EIDEMPOTENCY   = "idempotency_mismatch" // 422: a reused clientRequestId with another body
	EINVALIDVALUE  = "invalid_value"        // 422: well-formed input with a value the rules refuse
	EINTERNAL      = "internal"             // 500: a bug or an unavailable dependency
	EUNAVAILABLE   = "unavailable"          // 503: shutting down or not ready
	ECONFLICT      = "conflict"             // internal: optimistic concurrency lost; the engine retries
)

// Error codes of the server's own protections (open mode, quotas, the
// session cookie).
const (
	EMEDIATYPE   = "unsupported_media_type" // 415: a body not sent as application/json to an open server
	ERATELIMITED = "rate_limited"           // 429: over a per-token quota; retry after the Retry-After header
	// ECSRF refuses a request signed in by the web UI's session cookie
	// that another origin could have made: one from another Origin, or a
	// write without the session's X-Parley-CSRF header.
	ECSRF = "csrf_failed" // 403
)

// Error is the error type of the domain. Code is one of the E* constants;
// Message is written for the person or program that must act on it. Head, when
// set, is the conversation's head at the time of a 409 so that the caller can
// decide again without another request. Details carries extra fields that are
// copied into the JSON error body.
type Error struct {
	Code    string
	Message string
	Head    *Head
	Details map[string]any
}

// Error implements the error interface.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, EINTERNAL
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of err if it is an *Error and a generic
// text otherwise, so that internal details never reach a client.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// WithHead returns a copy of e that carries the conversation head.
func (e *Error) WithHead(h Head) *Error {
	c := *e
	c.Head = &h
	return &c
}

// With returns a copy of e with one more detail field.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		c.Details[k] = v
	}
	c.Details[key] = value
	return &c
}
