package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

// TestWriteErrLogsOnlyInternalErrors: an internal error is logged and
// hidden; a refusal is not logged; a request its client canceled is not an
// error of the server's and gets 499 with no body.
func TestWriteErrLogsOnlyInternalErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		logged string
	}{
		{fmt.Errorf("disk on fire"), 500, "level=ERROR"},
		{parley.Errorf(parley.ENOTFOUND, "no such message"), 404, ""},
		{fmt.Errorf("appending: %w", context.Canceled), 499, ""},
	} {
		var log bytes.Buffer
		rec := httptest.NewRecorder()
		writeErr(rec, slog.New(slog.NewTextHandler(&log, nil)), c.err)
		if rec.Code != c.status || !strings.Contains(log.String(), c.logged) || c.logged == "" && log.Len() > 0 {
			t.Errorf("%v: status %d, log %q; want %d and %q", c.err, rec.Code, log.String(), c.status, c.logged)
		}
		if c.status == 500 && strings.Contains(rec.Body.String(), "fire") {
			t.Errorf("an internal error reached the client: %s", rec.Body)
		}
	}
	// A driver may report a client's cancellation as a closed connection:
	// with the request's context done it is not an error of the server's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log bytes.Buffer
	rec := httptest.NewRecorder()
	writeErr(&statusRecorder{ResponseWriter: rec, ctx: ctx}, slog.New(slog.NewTextHandler(&log, nil)), fmt.Errorf("write failed: use of closed network connection"))
	if rec.Code != 499 || log.Len() > 0 {
		t.Errorf("a failure after the client left: status %d, log %q", rec.Code, log.String())
	}
}
