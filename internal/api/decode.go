package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/parleyhq/parley"
)

// Request bodies are parley's (parley.PostMessageRequest, …): the SDK
// sends what the server reads. Unknown fields are refused so that a typo
// (replyToMessageId for replyTo, say) is an error instead of a silently
// ignored field.

// messageRequest is the body of a message: parley.PostMessageRequest, but
// for its content, which the server tells apart from none when it is
// empty (content "" is an empty text part; with parts it is refused).
type messageRequest struct {
	parley.PostMessageRequest
	Content *string `json:"content,omitempty"`
}

// eventRequest is the body of an event.
type eventRequest struct{ parley.PostEventRequest }

// decodeBody reads one JSON object of at most max bytes from the request,
// once the server's budget of bodies has room for it (see reserveBody).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	n, err := s.reserveBody(w, r, max, max)
	if err != nil {
		return err
	}
	defer s.bodies.Release(n)
	err = decodeJSON(http.MaxBytesReader(w, r.Body, max), max, v)
	if err == nil {
		bodyRead(w)
	}
	return err
}

// decodeBytes is decodeJSON for a message held in memory (a runner's
// frame): the usual, well-formed message is decoded without the buffered
// reading and pre-scan decodeJSON needs for bodies; any other goes
// through decodeJSON, for its error.
func decodeBytes(data []byte, max int64, v any) error {
	if int64(len(data)) <= max {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err == nil {
			rest := data[dec.InputOffset():]
			if len(bytes.TrimLeft(rest, " \t\r\n")) == 0 && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
				return nil
			}
		}
		reflect.ValueOf(v).Elem().SetZero() // decodeJSON decodes it again, from nothing
	}
	return decodeJSON(bytes.NewReader(data), max, v)
}

// decodeJSON decodes exactly one JSON object from rd into v and turns every
// failure into a *parley.Error a client can act on: 413 for a body over max,
// 400 for the rest, saying where and what.
func decodeJSON(rd io.Reader, max int64, v any) error {
	br := bufio.NewReader(rd)
	if err := expectObject(br, max); err != nil {
		return err
	}
	cr := &countingReader{r: br}
	dec := json.NewDecoder(cr)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				return tooLarge(max)
			}
			return parley.Errorf(parley.EINVALID, "the body must hold one JSON object and nothing after it (extra data at byte %d)", dec.InputOffset())
		}
		return nil
	}
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(max)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return parley.Errorf(parley.EINVALID, "the JSON body is truncated: it ends at byte %d inside a value", cr.n)
	case errors.As(err, &syn):
		return parley.Errorf(parley.EINVALID, "malformed JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return parley.Errorf(parley.EINVALID, "the body must be a JSON object, not %s", typ.Value)
		}
		if lit, ok := strings.CutPrefix(typ.Value, "number "); ok && isInt(typ.Type) && wholeNumber(strings.TrimPrefix(lit, "-")) {
			// A whole number is well formed; it is out of range.
			return parley.Errorf(parley.EINVALIDVALUE, "%s %s is out of range (at byte %d)", typ.Field, lit, typ.Offset)
		}
		return parley.Errorf(parley.EINVALID, "%s must be %s, not %s (at byte %d)", typ.Field, jsonKind(typ.Type), typ.Value, typ.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return parley.Errorf(parley.EINVALID, "unknown field %s (at byte %d)", strings.TrimPrefix(err.Error(), "json: unknown field "), dec.InputOffset())
	}
	return parley.Errorf(parley.EINVALID, "invalid JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// expectObject skips leading white space and checks that a JSON object
// follows, so that an empty body, null, an array or a bare value is refused
// before decoding.
func expectObject(br *bufio.Reader, max int64) error {
	for {
		b, err := br.ReadByte()
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return tooLarge(max)
		case errors.Is(err, io.EOF):
			return parley.Errorf(parley.EINVALID, "a JSON object body is required (send {} for no fields)")
		case err != nil:
			return parley.Errorf(parley.EINVALID, "the body could not be read: %v", err)
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return br.UnreadByte()
		}
		return parley.Errorf(parley.EINVALID, "the body must be a JSON object, starting with {, not %q", b)
	}
}

// countingReader counts the bytes read, to say where a truncated body ends.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func tooLarge(max int64) error {
	return parley.Errorf(parley.ETOOLARGE, "the body is larger than %d bytes", max)
}

// isInt reports whether t is an integer type (or a pointer to one).
func isInt(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	if isInt(t) {
		return "a whole number"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a number"
}

// clientRequestID reconciles the body's clientRequestId with the
// Idempotency-Key header.
func clientRequestID(r *http.Request, body string) (string, error) {
	h := r.Header.Get("Idempotency-Key")
	switch {
	case h != "" && body != "" && h != body:
		return "", parley.Errorf(parley.EINVALID, "the Idempotency-Key header and clientRequestId differ; send one")
	case h != "":
		body = h
	}
	if body != "" && !parley.ValidID(body) {
		return "", parley.Errorf(parley.EINVALIDVALUE, "clientRequestId must be 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)")
	}
	return body, nil
}

// maxPageLimit is the largest page a list returns.
const maxPageLimit = 1000

// page reads ?after=SEQ&limit=N: after defaults to 0, limit to 100 (at most
// maxPageLimit).
func page(r *http.Request) (after int64, limit int, err error) {
	q := r.URL.Query()
	after, err = queryInt(q, "after", 0, 0, math.MaxInt64)
	if err != nil {
		return 0, 0, err
	}
	n, err := pageLimit(q)
	return after, n, err
}

// pageLimit reads ?limit=N: 1 to maxPageLimit, 100 by default.
func pageLimit(q url.Values) (int, error) {
	n, err := queryInt(q, "limit", 100, 1, maxPageLimit)
	return int(n), err
}

// queryInt reads query parameter name as a whole number from min to max,
// or def when it is absent. A value that is not a whole number written in
// decimal digits (an optional minus sign, no leading zeros), or that is
// given twice, is EINVALID; a whole number outside min..max, even one too
// large for 64 bits, is EINVALIDVALUE. Nothing is clamped.
func queryInt(q url.Values, name string, def, min, max int64) (int64, error) {
	vs, ok := q[name]
	switch {
	case !ok:
		return def, nil
	case len(vs) > 1:
		return 0, parley.Errorf(parley.EINVALID, "give %s once, not %d times", name, len(vs))
	case !wholeNumber(strings.TrimPrefix(vs[0], "-")):
		return 0, parley.Errorf(parley.EINVALID, "%s must be a whole number written in digits, not %q", name, vs[0])
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < min || n > max {
		return 0, parley.Errorf(parley.EINVALIDVALUE, "%s must be from %d to %d, not %s", name, min, max, vs[0])
	}
	return n, nil
}

// wholeNumber reports whether s is decimal digits without a sign or leading
// zeros ("0" itself is one).
func wholeNumber(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parts turns a message request's content or parts into parts.
func (m *messageRequest) parts() ([]parley.Part, error) {
	switch {
	case m.Content != nil && m.Parts != nil:
		return nil, parley.Errorf(parley.EINVALID, "give content or parts, not both")
	case m.Content != nil:
		return []parley.Part{{Type: parley.PartText, Text: *m.Content}}, nil
	}
	return m.Parts, nil
}
