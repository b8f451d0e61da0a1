package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/transfer"
)

// exportConversation serves GET /v1/conversations/{id}/export?format=….
// Any reader may export. The export is read from a snapshot of the store,
// which no writer waits for, into a file of the server's spool, and then
// sent from it at the client's pace: the snapshot lasts as long as the
// store takes to read, not as long as the client takes to download. So
// every error is a JSON error as usual, and the answer has its length.
func (s *Server) exportConversation(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	f, err := transfer.ParseFormat(r.URL.Query().Get("format"))
	if err == nil {
		err = s.readable(r, who)
	}
	id := r.PathValue("id")
	var file *spool.File
	if err == nil {
		file, err = s.spoolExport(r.Context(), id, f)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer file.Close()
	h := w.Header()
	h.Set("Content-Type", f.ContentType())
	h.Set("Content-Length", strconv.FormatInt(file.Size(), 10))
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s%s"`, id, f.Extension()))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s.send(w, file.Reader(), "an export")
}

// maxExportReads is how many exports read the store at once; the others
// wait their turn, so that exports leave the store's readers (four on
// SQLite) to everything else.
const maxExportReads = 2

// spoolExport writes the export of conversation id in format f to a new
// file of the spool, within its bounds, and returns it: close it.
func (s *Server) spoolExport(ctx context.Context, id string, f transfer.Format) (*spool.File, error) {
	select {
	case s.exportReads <- struct{}{}:
		defer func() { <-s.exportReads }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	file, err := s.opts.Spool.Create("export")
	if err != nil {
		return nil, err
	}
	if _, err := transfer.Export(ctx, s.rd, id, f, file); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// send writes what r holds to w as the client takes it. A client that
// stops reading is dropped after WriteTimeout without progress, so that
// it does not hold what is sent to it (a file of the spool, the one
// backup) for long. An error reading r is logged: the client then sees a
// body shorter than its Content-Length.
func (s *Server) send(w http.ResponseWriter, r io.Reader, what string) {
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	buf := make([]byte, 1<<20)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			s.log.Error("sending "+what+" failed", slog.Any("err", err))
			return
		}
	}
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
