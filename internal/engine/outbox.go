package engine

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// DeliveryOptions configure the outbox worker.
type DeliveryOptions struct {
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
}

// withDefaults fills in the options left zero.
func (o DeliveryOptions) withDefaults() DeliveryOptions {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
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
)

// Deliver posts channel auto-replies from the outbox to their channel's
// webhook until ctx ends: JSON {conversationId, messageId, channel, content}
// with the delivery's id (made by the server) in the Idempotency-Key
// header, at least once. A failed attempt is tried again after a backoff
// that grows, and a delivery is given up (status failed, kept with its last
// error and attempts for o.Retention, see store.ListDeliveries) once that
// cannot mend it or o.GiveUp has passed. While a channel type's webhook
// fails, its rows wait and one probes it at a time, after the channel's own
// backoff. Done rows are removed after o.Retention. Of several nodes on one
// store, one posts each row (see store.TakeDeliveries).
func (e *Engine) Deliver(ctx context.Context, o DeliveryOptions) {
	w := &deliverer{e: e, o: o.withDefaults(), circuits: map[string]*circuit{}}
	take := func(ctx context.Context, now parley.Time, limit int) ([]*parley.Delivery, error) {
		w.prune(ctx, now.Time)
		return e.store.TakeDeliveries(ctx, store.TakeDeliveriesParams{Now: now, Until: parley.NewTime(now.Add(w.o.Lease)), Limit: limit})
	}
	pollDue(ctx, e, w.o.Poll, "the outbox", take, func(d *parley.Delivery) { w.deliver(ctx, d) })
}

// deliverer is one Deliver loop's state.
type deliverer struct {
	e *Engine
	o DeliveryOptions
	// circuits are the channel types whose webhook failed last, by type:
	// one per configured webhook at most.
	circuits map[string]*circuit
	// pruned is when done rows were last removed.
	pruned time.Time
}

// circuit is what the deliverer knows of a failing webhook: how many
// attempts failed in a row, when it may be tried again (one row, a probe),
// and why the last attempt failed.
type circuit struct {
	failures int
	until    time.Time
	lastErr  string
}

// pollDue reads what is due at every tick until ctx ends and hands each item
// to do; a failed read is logged and tried again at the next tick.
func pollDue[T any](ctx context.Context, e *Engine, every time.Duration, what string, due func(context.Context, parley.Time, int) ([]T, error), do func(T)) {
	tick(ctx, every, func() {
		items, err := due(ctx, parley.NewTime(e.opts.Now()), 100)
		if err != nil {
			if ctx.Err() == nil {
				e.opts.Logger.Warn("reading "+what+" failed", slog.Any("err", err))
			}
			return
		}
		for _, it := range items {
			do(it)
		}
	})
}

// tick calls fn every interval until ctx ends.
func tick(ctx context.Context, every time.Duration, fn func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// deliver attempts one row, unless its channel's webhook is failing and
// not due for a probe: then the row waits until the webhook may be probed
// again (not for its lease, which may be longer than the channel's
// backoff), or is given up if its time is over.
func (w *deliverer) deliver(ctx context.Context, d *parley.Delivery) {
	now := w.e.opts.Now()
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
	now = w.e.opts.Now()
	if err == nil {
		delete(w.circuits, d.Channel.Type)
		d.Status, d.DeliveredAt, d.LastError = parley.DeliveryDelivered, parley.NewTime(now), ""
		w.e.opts.Metrics.Deliveries.WithLabelValues("delivered").Inc()
		w.update(ctx, d)
		return
	}
	d.Attempts++
	w.e.opts.Metrics.Deliveries.WithLabelValues("failed").Inc()
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
func (w *deliverer) backoff(n int) time.Duration {
	wait := min(w.o.Backoff<<min(n-1, 30), w.o.MaxBackoff)
	if wait <= 0 { // Backoff<<30 overflowed
		wait = w.o.MaxBackoff
	}
	return wait/2 + rand.N(wait/2+1)
}

// giveUp records a delivery as failed: it is kept with why and its
// attempts, counted, logged once (the webhook's URL is never in why), and
// never attempted again.
func (w *deliverer) giveUp(ctx context.Context, d *parley.Delivery, now time.Time, why string) {
	d.Status, d.GaveUpAt, d.LastError = parley.DeliveryFailed, parley.NewTime(now), why
	w.e.opts.Metrics.Deliveries.WithLabelValues("given_up").Inc()
	if w.update(ctx, d) {
		w.e.opts.Logger.Warn("gave up a channel delivery", slog.String("delivery", d.ID), slog.String("conversation", d.ConversationID),
			slog.String("message", d.MessageID), slog.String("channel", d.Channel.Type), slog.Int("attempts", d.Attempts), slog.String("err", why))
	}
}

// update records what became of a delivery, and reports whether it was.
func (w *deliverer) update(ctx context.Context, d *parley.Delivery) bool {
	err := w.e.store.UpdateDelivery(ctx, d)
	if err != nil && ctx.Err() == nil {
		w.e.opts.Logger.Warn("recording a delivery failed", slog.String("delivery", d.ID), slog.Any("err", err))
	}
	return err == nil
}

// prune removes the rows done before the retention, every pruneEvery.
func (w *deliverer) prune(ctx context.Context, now time.Time) {
	if now.Before(w.pruned.Add(pruneEvery)) {
		return
	}
	w.pruned = now
	before := parley.NewTime(now.Add(-w.o.Retention))
	for range prunePages {
		n, err := w.e.store.PruneDeliveries(ctx, store.PruneDeliveriesParams{Before: before, Limit: prunePage})
		if err != nil {
			if ctx.Err() == nil {
				w.e.opts.Logger.Warn("removing old outbox rows failed", slog.Any("err", err))
			}
			return
		}
		if n < prunePage {
			return
		}
	}
}
