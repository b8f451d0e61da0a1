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
// hidden; a refusal is not logged; a failure that came of the client going
// away (a canceled context, or a driver's closed connection) is not an
// error of the server's and gets 499 with no body. A canceled context
// while the client is still there is an internal error like any other.
func TestWriteErrLogsOnlyInternalErrors(t *testing.T) {
	t.Parallel()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		err        error
		clientGone bool
		status     int
		logged     string
	}{
		{fmt.Errorf("disk on fire"), false, 500, "level=ERROR"},
		{parley.Errorf(parley.ENOTFOUND, "no such message"), false, 404, ""},
		{parley.Errorf(parley.ENOTFOUND, "no such message"), true, 404, ""},
		{fmt.Errorf("appending: %w", context.Canceled), true, 499, ""},
		{fmt.Errorf("write failed: use of closed network connection"), true, 499, ""},
		{fmt.Errorf("appending: %w", context.Canceled), false, 500, "level=ERROR"},
	} {
		ctx := context.Background()
		if c.clientGone {
			ctx = gone
		}
		var log bytes.Buffer
		rec := httptest.NewRecorder()
		writeErr(&statusRecorder{ResponseWriter: rec, ctx: ctx}, slog.New(slog.NewTextHandler(&log, nil)), c.err)
		if rec.Code != c.status || !strings.Contains(log.String(), c.logged) || c.logged == "" && log.Len() > 0 {
			t.Errorf("%v (client gone %v): status %d, log %q; want %d and %q", c.err, c.clientGone, rec.Code, log.String(), c.status, c.logged)
		}
		if c.status == 500 && strings.Contains(rec.Body.String(), "fire") {
			t.Errorf("an internal error reached the client: %s", rec.Body)
		}
	}
}
