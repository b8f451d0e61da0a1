package api

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/spool"
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
	b, ok := s.rd.Backuper()
	if !ok {
		writeErr(w, s.log, parley.Errorf(parley.ENOTFOUND, "this server stores in PostgreSQL, which it does not back up itself: use pg_dump or point-in-time recovery (see docs/operations.md)"))
		return
	}
	if !s.backingUp.CompareAndSwap(false, true) {
		writeErr(w, s.log, parley.Errorf(parley.EBUSY, "a backup of this server is being made or sent; try again once it ends"))
		return
	}
	defer s.backingUp.Store(false)
	// Made by name in the spool (the store writes it so), and unnamed once
	// open: a server that dies while it is made leaves it to be swept
	// when it starts again, and one that dies while it is sent leaves
	// nothing.
	path, err := s.opts.Spool.Name("backup", ".db")
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer spool.Unlink(path)
	if err := b.Backup(r.Context(), path, nil); err != nil {
		writeErr(w, s.log, err)
		return
	}
	f, err := os.Open(path)
	if err == nil {
		err = spool.Unlink(path)
	}
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
	s.send(w, f, "a backup")
}
