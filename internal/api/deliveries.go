package api

import (
	"net/http"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// maxCursorBytes bounds a cursor of the outbox's listing (a delivery id).
const maxCursorBytes = 512

// listDeliveries serves GET /v1/admin/deliveries?status=&cursor=&limit=:
// the outbox's channel auto-replies, pending, delivered or given up
// (failed, with their last error and attempts), by id. Admins only: a
// reply's content is of any conversation. A page holds at most limit rows
// and ends once it holds about PageBytes; nextCursor says where the next
// starts.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if who.Kind != parley.TokenAdmin {
		writeErr(w, s.log, parley.Errorf(parley.EFORBIDDEN, "only an admin token may list the outbox's deliveries"))
		return
	}
	q := r.URL.Query()
	limit, err := pageLimit(q)
	status, cursor := parley.DeliveryStatus(q.Get("status")), q.Get("cursor")
	switch {
	case err != nil:
	case status != "" && !status.Valid():
		err = parley.Errorf(parley.EINVALIDVALUE, "status %q is not one of pending, delivered, failed", status)
	case len(cursor) > maxCursorBytes:
		err = parley.Errorf(parley.EINVALIDVALUE, "cursor is %d bytes; a delivery's cursor is at most %d", len(cursor), maxCursorBytes)
	}
	var ds []*parley.Delivery
	if err == nil {
		ds, err = s.rd.Deliveries(r.Context(), store.ListDeliveriesParams{Status: status, After: cursor, Limit: limit, MaxBytes: s.opts.PageBytes})
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	body := map[string]any{"deliveries": ds}
	if len(ds) > 0 && (len(ds) == limit || reads.Size(ds) >= s.opts.PageBytes) {
		body["nextCursor"] = ds[len(ds)-1].ID
	}
	writeJSON(w, http.StatusOK, body)
}
