package loadgen

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/parleyhq/parley/internal/sqlite/sqlitemetrics"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Writer is what the server's one SQLite writer did over the measured
// window, from the counters its /metrics serves at the window's start and
// end (none with PostgreSQL, or when /metrics does not answer).
type Writer struct {
	// BusyShare is the share of the window the writer spent committing.
	// Each commit waits for the disk whatever its size, so it is high even
	// at a modest load; near 1, with writes per commit that grow with the
	// load, the writer is what bounds the run.
	BusyShare float64 `json:"busyShare"`
	// CommitsPerSec counts its transactions, each a group commit.
	CommitsPerSec float64 `json:"commitsPerSec"`
	// WritesPerCommit is the appends (and other writes) in each, on average.
	WritesPerCommit float64 `json:"writesPerCommit"`
}

// writerSample is the writer's counters at one moment; ok is false when
// they could not be read.
type writerSample struct {
	at                    time.Time
	ok                    bool
	commits, writes, busy float64
}

// maxMetricsBytes bounds what is read of a server's /metrics (parley
// serve's is some tens of KiB).
const maxMetricsBytes = 8 << 20

// sampleWriter reads the writer's counters from the first node's /metrics.
func (b *bench) sampleWriter(ctx context.Context) writerSample {
	s := writerSample{at: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/metrics", nil)
	if err != nil {
		return s
	}
	res, err := b.hc.Do(req)
	if err != nil {
		return s
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return s
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(res.Body, maxMetricsBytes))
	if err != nil {
		return s
	}
	counter := func(name string) (float64, bool) {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter() == nil {
			return 0, false
		}
		return f.GetMetric()[0].GetCounter().GetValue(), true
	}
	var ok1, ok2, ok3 bool
	s.commits, ok1 = counter(sqlitemetrics.CommitsName)
	s.writes, ok2 = counter(sqlitemetrics.WritesName)
	s.busy, ok3 = counter(sqlitemetrics.BusyName)
	s.ok = ok1 && ok2 && ok3
	return s
}

// writerOver returns what the writer did between two samples, or nil if
// either could not be read.
func writerOver(a, z writerSample) *Writer {
	d := z.at.Sub(a.at).Seconds()
	if !a.ok || !z.ok || d <= 0 {
		return nil
	}
	// A commit's time is counted when it ends, so one that began before
	// the first sample may add a little more than the interval: a share
	// is at most 1.
	w := &Writer{BusyShare: round2(min(1, (z.busy-a.busy)/d)), CommitsPerSec: round2((z.commits - a.commits) / d)}
	if n := z.commits - a.commits; n > 0 {
		w.WritesPerCommit = round2((z.writes - a.writes) / n)
	}
	return w
}
