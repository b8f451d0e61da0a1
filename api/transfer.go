package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/transfer"
)

// exportConversation serves GET /v1/conversations/{id}/export?format=….
// Any reader may export. The body is the export file; an error found before
// the first byte is a JSON error as usual.
func (s *Server) exportConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	f, err := transfer.ParseFormat(r.URL.Query().Get("format"))
	if err == nil {
		err = s.readable(r, who)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	id := r.PathValue("id")
	out := &lazyHeaders{w: w, set: func(h http.Header) {
		h.Set("Content-Type", f.ContentType())
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s%s"`, id, f.Extension()))
		h.Set("Cache-Control", "no-store")
	}}
	if _, err := transfer.Export(r.Context(), s.eng, id, f, out); err != nil && !out.wrote {
		writeErr(w, s.log, err)
	}
}

// lazyHeaders sets the export's headers at its first byte, so that an
// error before it is answered with the usual JSON error instead.
type lazyHeaders struct {
	w     http.ResponseWriter
	set   func(http.Header)
	wrote bool
}

func (l *lazyHeaders) Write(p []byte) (int, error) {
	if !l.wrote {
		l.wrote = true
		l.set(l.w.Header())
	}
	return l.w.Write(p)
}

// importConversation serves POST /v1/conversations/import: the body is a
// Parley export or legacy rows, read as it arrives. Only admins import.
// Query: id (the conversation's id), title and participants (a comma
// separated list) for legacy rows.
func (s *Server) importConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanManage() {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "only an admin token may import"))
		return
	}
	q := r.URL.Query()
	opts := transfer.ImportOptions{ID: q.Get("id"), Title: q.Get("title"), CreatedBy: who.AgentID}
	if p := q.Get("participants"); p != "" {
		opts.Participants = strings.Split(p, ",")
	}
	if opts.ID != "" && !parley.ValidID(opts.ID) {
		writeErr(w, s.log, parley.Errorf(parley.EINVALIDVALUE, "id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", opts.ID))
		return
	}
	// An import streams: it holds at most one JSON value of its body at
	// once, and reserves that for as long as it runs.
	held, err := s.reserveBody(w, r, s.opts.MaxImportBytes, transfer.MaxValueBytes)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer s.bodies.Release(held)
	// An import may take long, but must keep coming: BodyTimeout bounds
	// each wait for data instead of the whole body.
	body := &bodyLimit{r: &idleReader{r: http.MaxBytesReader(w, r.Body, s.opts.MaxImportBytes), rc: http.NewResponseController(w), idle: s.opts.BodyTimeout}, limit: s.opts.MaxImportBytes}
	res, err := transfer.Import(r.Context(), s.eng, body, opts)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

// bodyLimit turns the error of a body over its limit into ETOOLARGE.
type bodyLimit struct {
	r     io.Reader
	limit int64
}

func (b *bodyLimit) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = parley.Errorf(parley.ETOOLARGE, "the import is over %d bytes (serve -max-import-bytes)", b.limit)
	}
	return n, err
}
