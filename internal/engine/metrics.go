package engine

import (
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus collectors.
type Metrics struct {
	Appends         *prometheus.CounterVec
	Events          prometheus.Counter
	AppendSeconds   prometheus.Histogram
	Subscribers     prometheus.Gauge
	SlowDisconnects prometheus.Counter
	Shed            prometheus.Counter
	SubscriberBytes prometheus.GaugeFunc
	Delivered       prometheus.Counter

	// subscriberBytes is the hub SubscriberBytes reads, once an engine
	// has one.
	subscriberBytes atomic.Pointer[feed.Hub]
}

// NewMetrics makes the collectors and registers them with reg, unless reg is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_appends_total", Help: "Appends to conversation logs, by result code (ok or an error code).",
		}, []string{"result"}),
		Events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_events_appended_total", Help: "Events appended to conversation logs.",
		}),
		AppendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "parley_append_seconds", Help: "Time to make one append durable, group commit included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		Subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_subscribers", Help: "Live stream subscribers.",
		}),
		SlowDisconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_slow_subscriber_disconnects_total", Help: "Subscribers disconnected because they read too slowly.",
		}),
		Shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_subscribers_shed_total", Help: "Subscribers disconnected (busy) to keep what the server holds for streams that are not read within -subscriber-memory; also counted in parley_slow_subscriber_disconnects_total.",
		}),
		Delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_stream_items_delivered_total", Help: "Events and guidance handed to stream subscribers.",
		}),
	}
	m.SubscriberBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "parley_subscriber_bytes", Help: "Bytes the server holds for stream subscribers that they have not taken (snapshots being sent, queued events, pages of the log); at most -subscriber-memory.",
	}, func() float64 {
		if h := m.subscriberBytes.Load(); h != nil {
			return float64(h.Held())
		}
		return 0
	})
	if reg != nil {
		reg.MustRegister(m.Appends, m.Events, m.AppendSeconds, m.Subscribers, m.SlowDisconnects, m.Shed, m.SubscriberBytes, m.Delivered)
	}
	return m
}

func (m *Metrics) observeAppend(events int, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = errorLabel(err)
	} else {
		m.Events.Add(float64(events))
	}
	m.Appends.WithLabelValues(result).Inc()
	m.AppendSeconds.Observe(d.Seconds())
}

// errorLabel turns an error into a bounded label value: its code.
func errorLabel(err error) string { return parley.ErrorCode(err) }
