package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/parleyhq/parley"
)

// codeMethodNotAllowed is the code of a 405; it has no domain meaning.
const codeMethodNotAllowed = "method_not_allowed"

// statusOf maps an error code to its HTTP status. It is the only place
// where that mapping lives.
func statusOf(code string) int {
	switch code {
	case parley.EINVALID:
		return http.StatusBadRequest
	case parley.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case parley.EFORBIDDEN, parley.ECSRF:
		return http.StatusForbidden
	case parley.ENOTFOUND:
		return http.StatusNotFound
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case parley.ETURNCONFLICT, parley.EPRECONDITION, parley.ECLAIMCONFLICT, parley.ECLOSED, parley.EBUSY, parley.ENOTANSWERING, parley.EINPUTENDED:
		return http.StatusConflict
	case parley.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case parley.EMEDIATYPE:
		return http.StatusUnsupportedMediaType
	case parley.ERATELIMITED:
		return http.StatusTooManyRequests
	case parley.EINVALIDTHREAD, parley.EIDEMPOTENCY, parley.EINVALIDVALUE:
		return http.StatusUnprocessableEntity
	case parley.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorBody is the JSON shape of every error: {"error": {code, message, head?, ...details}}.
// An error without a known code becomes {"code": "internal", "message":
// "internal error"}: what went wrong is logged, never sent.
func errorBody(err error) map[string]any {
	code := parley.ErrorCode(err)
	if statusOf(code) == http.StatusInternalServerError {
		return map[string]any{"error": map[string]any{"code": parley.EINTERNAL, "message": "internal error"}}
	}
	body := map[string]any{"code": code, "message": parley.ErrorMessage(err)}
	var e *parley.Error
	if errors.As(err, &e) {
		for k, v := range e.Details {
			body[k] = v
		}
		if e.Head != nil {
			body["head"] = e.Head
		}
	}
	return map[string]any{"error": body}
}

// errorObject is errorBody's error object: {code, message, head?, ...details}.
func errorObject(err error) map[string]any { return errorBody(err)["error"].(map[string]any) }

// statusClientClosed is the status recorded (in logs and metrics) for a
// request whose client left before the answer; nginx's 499.
const statusClientClosed = 499

// writeErr answers with err's status and body. Internal errors are logged
// and reach the client only as "internal error".
func writeErr(w http.ResponseWriter, log *slog.Logger, err error) {
	if statusOf(parley.ErrorCode(err)) == http.StatusInternalServerError && clientGone(w) {
		// The client went away mid-request, and the failure came of it (a
		// canceled context, or a driver's closed connection): there is
		// nobody to answer and nothing went wrong here. The store either
		// committed or rolled back; an idempotent retry finds out which.
		log.Debug("request canceled by the client", slog.Any("err", err))
		w.WriteHeader(statusClientClosed)
		return
	}
	status := statusOf(parley.ErrorCode(err))
	if status == http.StatusInternalServerError {
		log.Error("internal error", slog.Any("err", err))
	}
	setRetryAfter(w, err)
	// With its length said, an error is whole once sent, whatever is done
	// with the connection after it (see linger).
	body, _ := json.Marshal(errorBody(err))
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client went away; nothing to do
}

// clientGone reports whether the client of the request w answers went
// away before the answer.
func clientGone(w http.ResponseWriter) bool {
	rec, ok := w.(*statusRecorder)
	return ok && rec.ctx != nil && rec.ctx.Err() != nil
}

// writeJSON answers with status and v as JSON. It escapes HTML the way
// json.Marshal does, so that an idempotent replay (whose stored answer was
// made by json.Marshal) is byte for byte the original answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

// RawResponse is the answer to err as a whole HTTP/1.1 response, for a
// connection refused before any request is read from it (see package
// connlimit): its status and JSON error body, Retry-After when the error
// says when to retry, and Connection: close.
func RawResponse(err error) []byte {
	body, _ := json.Marshal(errorBody(err))
	body = append(body, '\n')
	status := statusOf(parley.ErrorCode(err))
	h := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "Connection": {"close"},
		"Content-Length": {strconv.Itoa(len(body))}}
	if secs, ok := retryAfter(err); ok {
		h.Set("Retry-After", strconv.Itoa(secs))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}
