package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/sqlite/sqlitemetrics"
)

// TestSampleWriterRefusesWhatIsNotTheWriter: the writer's figures are read
// only from a /metrics that answers 200 with all three counters as
// counters; anything else (an error status, text that is not the format,
// a counter missing or of another type, a body past the read bound) gives
// no figures rather than wrong ones.
func TestSampleWriterRefusesWhatIsNotTheWriter(t *testing.T) {
	counters := func(commits, writes, busy string) string {
		return fmt.Sprintf("# TYPE %s counter\n%s %s\n# TYPE %s counter\n%s %s\n# TYPE %s counter\n%s %s\n",
			sqlitemetrics.CommitsName, sqlitemetrics.CommitsName, commits,
			sqlitemetrics.WritesName, sqlitemetrics.WritesName, writes,
			sqlitemetrics.BusyName, sqlitemetrics.BusyName, busy)
	}
	good := counters("10", "40", "2.5")
	for _, tc := range []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"the writer's counters", 200, good, true},
		{"an error status", 500, good, false},
		{"not the text format", 200, "{\"commits\": 10}\n", false},
		{"a counter missing", 200, strings.SplitAfterN(good, "\n", 5)[4], false},
		{"a gauge, not a counter", 200, strings.Replace(good, sqlitemetrics.BusyName+" counter", sqlitemetrics.BusyName+" gauge", 1), false},
		{"past the read bound", 200, "# HELP x " + strings.Repeat("y", maxMetricsBytes) + "\n" + good, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			b := &bench{url: srv.URL, hc: srv.Client()}
			s := b.sampleWriter(context.Background())
			if s.ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", s.ok, tc.ok, s)
			}
			if tc.ok && (s.commits != 10 || s.writes != 40 || s.busy != 2.5) {
				t.Fatalf("read %+v", s)
			}
		})
	}
}

// TestWriterOver: the figures between two samples, none if either is
// missing, and a busy share of at most 1 (a commit counts whole when it
// ends, so the interval may hold a little more than itself).
func TestWriterOver(t *testing.T) {
	at := time.Now()
	a := writerSample{at: at, ok: true, commits: 100, writes: 1000, busy: 1}
	z := writerSample{at: at.Add(2 * time.Second), ok: true, commits: 300, writes: 5000, busy: 2.5}
	if w := writerOver(a, z); w == nil || *w != (Writer{BusyShare: 0.75, CommitsPerSec: 100, WritesPerCommit: 20}) {
		t.Fatalf("writerOver = %+v", w)
	}
	z.busy = 3.2
	if w := writerOver(a, z); w == nil || w.BusyShare != 1 {
		t.Fatalf("busy share over a straddling commit: %+v", w)
	}
	for _, pair := range [][2]writerSample{{{ok: false}, z}, {a, {ok: false, at: z.at}}, {a, a}} {
		if w := writerOver(pair[0], pair[1]); w != nil {
			t.Fatalf("writerOver(%+v, %+v) = %+v, want none", pair[0], pair[1], *w)
		}
	}
}
