// Package deliveries posts the replies written to channel conversations
// (Slack, Telegram, …) to their channel's webhook: the engine writes each
// reply's delivery into the store's outbox in the same append as the
// reply, and a Worker takes the due rows and posts them, with a backoff
// that grows, a circuit per channel type, giving up on a row in the end,
// and removing done rows after a retention.
package deliveries

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tick"
	"github.com/prometheus/client_golang/prometheus"
)

// Store is the outbox a Worker reads and records its attempts in
// (store.Store has it).
type Store interface {
	// TakeDeliveries leases the undelivered rows that are due.
	TakeDeliveries(ctx context.Context, p store.TakeDeliveriesParams) ([]*parley.Delivery, error)
	// UpdateDelivery records an attempt.
	UpdateDelivery(ctx context.Context, d *parley.Delivery) error
	// PruneDeliveries removes rows that were done before p.Before.
	PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int, error)
}

// Options configure a Worker. Zero values take the defaults.
type Options struct {
	// Webhooks maps a channel type (slack, telegram, …) to the URL its
	// replies are posted to.
	Webhooks map[string]string
	// Client posts the deliveries (default: 10 s timeout).
	Client *http.Client
	// Poll is how often the outbox is read (default 250 ms).
	Poll time.Duration
	// Backoff is the wait after a delivery's first failed attempt (default
	// 10 s). Each failure doubles it, up to MaxBackoff (default 5 min), and
	// the wait taken is from half of it to all of it, at random, so that
	// rows that failed together are not tried together again.
	Backoff, MaxBackoff time.Duration
	// GiveUp is how long after its reply was written a delivery is tried
	// before it is given up (default 24 h). A failure that trying again
	// cannot mend gives it up at once: no webhook for its channel type, or
	// an answer 4xx other than 408, 425 and 429.
	GiveUp time.Duration
	// Retention is how long a delivered or given-up row is kept, to be
	// looked at, before it is removed (default 7 days).
	Retention time.Duration
	// Lease is how long a node holds the rows it took before another node
	// may take them (default 1 min, past Client's timeout): a node that
	// dies mid-delivery leaves its rows to the others after it.
	Lease time.Duration
	// Now returns the current time (default time.Now); tests may replace it.
	Now func() time.Time
	// Logger receives the deliveries given up and the failures to read or
	// record them (default: none).
	Logger *slog.Logger
	// Metrics counts the attempts (default: collectors registered nowhere).
	Metrics *Metrics
}

// withDefaults fills in the options left zero.
func (o Options) withDefaults() Options {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.Poll, 250 * time.Millisecond}, {&o.Backoff, 10 * time.Second}, {&o.MaxBackoff, 5 * time.Minute},
		{&o.GiveUp, 24 * time.Hour}, {&o.Retention, 7 * 24 * time.Hour}, {&o.Lease, time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return o
}

// Outbox bounds.
const (
	// pruneEvery is how often done rows past their retention are removed,
	// at most prunePages pages of prunePage rows at a time.
	pruneEvery = time.Minute
	prunePage  = 1000
	prunePages = 100
	// takeLimit bounds the rows one poll takes.
	takeLimit = 100
)

// Metrics are the Prometheus collectors of deliveries.
type Metrics struct {
	// Deliveries counts attempts by result: delivered, failed (an attempt
	// that failed), given_up (a delivery given up).
	Deliveries *prometheus.CounterVec
}

// NewMetrics makes the collectors and registers them with reg, unless reg is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_channel_deliveries_total", Help: "Channel auto-reply deliveries, by result: delivered, failed (an attempt that failed), given_up (a delivery given up).",
	}, []string{"result"})}
	if reg != nil {
		reg.MustRegister(m.Deliveries)
	}
	return m
}

// Worker posts the deliveries of a store's outbox (see Deliver).
type Worker struct {
	store Store
	o     Options
	// circuits are the channel types whose webhook failed last, by type:
	// one per configured webhook at most.
	circuits map[string]*circuit
	// pruned is when done rows were last removed.
	pruned time.Time
}

// New returns a Worker of st's outbox.
func New(st Store, o Options) *Worker {
	return &Worker{store: st, o: o.withDefaults(), circuits: map[string]*circuit{}}
}

// Deliver posts channel auto-replies from the outbox to their channel's
// webhook until ctx ends: JSON {conversationId, messageId, channel, content}
// with the delivery's id (made by the server) in the Idempotency-Key
// header, at least once. A failed attempt is tried again after a backoff
// that grows, and a delivery is given up (status failed, kept with its last
// error and attempts for Options.Retention, see store.ListDeliveries) once
// that cannot mend it or Options.GiveUp has passed. While a channel type's
// webhook fails, its rows wait and one probes it at a time, after the
// channel's own backoff. Done rows are removed after Options.Retention. Of
// several nodes on one store, one posts each row (see
// store.TakeDeliveries). A Worker runs one Deliver at a time.
func (w *Worker) Deliver(ctx context.Context) {
	tick.Every(ctx, w.o.Poll, func() {
		now := parley.NewTime(w.o.Now())
		w.prune(ctx, now.Time)
		due, err := w.store.TakeDeliveries(ctx, store.TakeDeliveriesParams{Now: now, Until: parley.NewTime(now.Add(w.o.Lease)), Limit: takeLimit})
		if err != nil {
			if ctx.Err() == nil {
				w.o.Logger.Warn("reading the outbox failed", slog.Any("err", err))
			}
			return
		}
		for _, d := range due {
			w.deliver(ctx, d)
		}
	})
}

// circuit is what the worker knows of a failing webhook: how many
// attempts failed in a row, when it may be tried again (one row, a probe),
// and why the last attempt failed.
type circuit struct {
	failures int
	until    time.Time
	lastErr  string
}

// deliver attempts one row, unless its channel's webhook is failing and
// not due for a probe: then the row waits until the webhook may be probed
// again (not for its lease, which may be longer than the channel's
// backoff), or is given up if its time is over.
func (w *Worker) deliver(ctx context.Context, d *parley.Delivery) {
	now := w.o.Now()
	over := !now.Before(d.CreatedAt.Add(w.o.GiveUp))
	if c := w.circuits[d.Channel.Type]; c != nil && now.Before(c.until) {
		if over {
			why := d.LastError
			if why == "" {
				why = "the channel's webhook is failing: " + c.lastErr
			}
			w.giveUp(ctx, d, now, why)
			return
		}
		next := c.until
		if end := d.CreatedAt.Add(w.o.GiveUp); next.After(end) {
			next = end
		}
		d.NextAttemptAt = parley.NewTime(next)
		w.update(ctx, d)
		return
	}
	err := post(ctx, w.o, d)
	if ctx.Err() != nil {
		return // shutting down: the row is taken again once its lease ends
	}
	now = w.o.Now()
	if err == nil {
		delete(w.circuits, d.Channel.Type)
		d.Status, d.DeliveredAt, d.LastError = parley.DeliveryDelivered, parley.NewTime(now), ""
		w.o.Metrics.Deliveries.WithLabelValues("delivered").Inc()
		w.update(ctx, d)
		return
	}
	d.Attempts++
	w.o.Metrics.Deliveries.WithLabelValues("failed").Inc()
	if isPermanent(err) || !now.Before(d.CreatedAt.Add(w.o.GiveUp)) {
		w.giveUp(ctx, d, now, err.Error())
		return
	}
	c := w.circuits[d.Channel.Type]
	if c == nil {
		c = &circuit{}
		w.circuits[d.Channel.Type] = c
	}
	c.failures++
	c.until, c.lastErr = now.Add(w.backoff(c.failures)), err.Error()
	// Tried again after its own backoff, and once more when its time is
	// over, before it is given up.
	next := now.Add(w.backoff(d.Attempts))
	if end := d.CreatedAt.Add(w.o.GiveUp); next.After(end) {
		next = end
	}
	d.NextAttemptAt, d.LastError = parley.NewTime(next), err.Error()
	w.update(ctx, d)
}

// backoff is the wait after n failed attempts in a row: o.Backoff doubled
// n-1 times, at most o.MaxBackoff, of which the half to all is taken.
func (w *Worker) backoff(n int) time.Duration {
	wait := min(w.o.Backoff<<min(n-1, 30), w.o.MaxBackoff)
	if wait <= 0 { // Backoff<<30 overflowed
		wait = w.o.MaxBackoff
	}
	return wait/2 + rand.N(wait/2+1)
}

// giveUp records a delivery as failed: it is kept with why and its
// attempts, counted, logged once (the webhook's URL is never in why), and
// never attempted again.
func (w *Worker) giveUp(ctx context.Context, d *parley.Delivery, now time.Time, why string) {
	d.Status, d.GaveUpAt, d.LastError = parley.DeliveryFailed, parley.NewTime(now), why
	w.o.Metrics.Deliveries.WithLabelValues("given_up").Inc()
	if w.update(ctx, d) {
		w.o.Logger.Warn("gave up a channel delivery", slog.String("delivery", d.ID), slog.String("conversation", d.ConversationID),
			slog.String("message", d.MessageID), slog.String("channel", d.Channel.Type), slog.Int("attempts", d.Attempts), slog.String("err", why))
	}
}

// update records what became of a delivery, and reports whether it was.
func (w *Worker) update(ctx context.Context, d *parley.Delivery) bool {
	err := w.store.UpdateDelivery(ctx, d)
	if err != nil && ctx.Err() == nil {
		w.o.Logger.Warn("recording a delivery failed", slog.String("delivery", d.ID), slog.Any("err", err))
	}
	return err == nil
}

// prune removes the rows done before the retention, every pruneEvery.
func (w *Worker) prune(ctx context.Context, now time.Time) {
	if now.Before(w.pruned.Add(pruneEvery)) {
		return
	}
	w.pruned = now
	before := parley.NewTime(now.Add(-w.o.Retention))
	for range prunePages {
		n, err := w.store.PruneDeliveries(ctx, store.PruneDeliveriesParams{Before: before, Limit: prunePage})
		if err != nil {
			if ctx.Err() == nil {
				w.o.Logger.Warn("removing old outbox rows failed", slog.Any("err", err))
			}
			return
		}
		if n < prunePage {
			return
		}
	}
}
