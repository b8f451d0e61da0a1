// Package sqlitemetrics exports the counters of a SQLite store's one
// writer as Prometheus metrics, for parley serve's /metrics.
package sqlitemetrics

import (
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/prometheus/client_golang/prometheus"
)

// The names of the metrics, which parley bench reads.
const (
	CommitsName = "parley_sqlite_commits_total"
	WritesName  = "parley_sqlite_commit_writes_total"
	BusyName    = "parley_sqlite_writer_busy_seconds_total"
	QueueName   = "parley_sqlite_write_queue"
	SyncName    = "parley_sqlite_log_sync_wait_seconds"
)

// Collectors returns the metrics of a SQLite store's one writer, read
// from its counters when /metrics is scraped: how many commits it made and
// of how many writes, how long it was busy committing, what waits for it,
// and how long the log's sync under way has taken. Every append of the server goes through the writer, one commit
// after another, and each commit waits for the disk whatever its size: a
// writer busy nearly all the time, with writes per commit and a queue that
// grow with the load, is what bounds the server.
func Collectors(db *sqlite.DB) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: CommitsName,
			Help: "Transactions committed by the SQLite store's one writer, each a group commit of the writes that waited for it."},
			func() float64 { return float64(db.Stats().Batches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: WritesName,
			Help: "Writes (appends and other changes) in those transactions; divided by parley_sqlite_commits_total, the writes per commit."},
			func() float64 { return float64(db.Stats().Writes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: BusyName,
			Help: "Time the SQLite store's one writer spent committing (the search index's batches too); its rate is the share of the time it was committing."},
			func() float64 { return db.Stats().Busy.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: QueueName,
			Help: "Writes waiting for the SQLite store's one writer."},
			func() float64 { return float64(db.Stats().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: SyncName,
			Help: "How long the sync of the SQLite store's log under way has taken so far (0 between syncs): writes are answered only once it returns, and a value that keeps growing is a disk that does not answer."},
			func() float64 { return db.Stats().SyncWait.Seconds() }),
	}
}
