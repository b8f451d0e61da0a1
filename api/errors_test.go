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
}
