package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// BackupContentType is the media type of a backup: an SQLite database.
const BackupContentType = "application/vnd.sqlite3"

// backup serves GET /v1/admin/backup: a consistent copy of the whole
// store, made while the server runs (store.Backuper), then sent as a file.
// Admins only, one at a time (409 busy while one is being made or sent);
// a store without backups of its own (PostgreSQL) answers 404.
func (s *Server) backup(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if who.Kind != parley.TokenAdmin {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "only an admin token may back up the server"))
		return
	}
	b, ok := s.eng.Store().(store.Backuper)
	if !ok {
		writeErr(w, s.log, parley.Errorf(parley.ENOTFOUND, "this server stores in PostgreSQL, which it does not back up itself: use pg_dump or point-in-time recovery (see docs/operations.md)"))
		return
	}
	if !s.backingUp.CompareAndSwap(false, true) {
		writeErr(w, s.log, parley.Errorf(parley.EBUSY, "a backup of this server is being made or sent; try again once it ends"))
		return
	}
	defer s.backingUp.Store(false)
	part, err := os.CreateTemp(s.opts.BackupDir, "parley-backup-*.db")
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	path := part.Name()
	part.Close()
	os.Remove(path) // Backup makes it
	defer func() {
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			os.Remove(p)
		}
	}()
	if err := b.Backup(r.Context(), path, nil); err != nil {
		writeErr(w, s.log, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", BackupContentType)
	h.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="parley-%s.db"`, time.Now().UTC().Format("20060102T150405Z")))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A client that stops reading is dropped after WriteTimeout without
	// progress, so that it does not hold the one backup at a time.
	rc := http.NewResponseController(w)
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.log.Error("sending a backup failed", slog.Any("err", err))
			return // the client sees a body shorter than Content-Length
		}
	}
	_ = rc.SetWriteDeadline(time.Time{})
}
