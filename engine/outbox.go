package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
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
	// MaxBackoff bounds the wait between attempts (default 5 min).
	MaxBackoff time.Duration
	// Lease is how long a node holds the rows it took before another node
	// may take them (default 1 min, past Client's timeout): a node that
	// dies mid-delivery leaves its rows to the others after it.
	Lease time.Duration
}

// Deliver posts channel auto-replies from the outbox to their channel's
// webhook until ctx ends: JSON {conversationId, messageId, channel, content}
// with the delivery's id (made by the server) in the Idempotency-Key
// header, at least once, retried
// with exponential backoff. Of several nodes on one store, one posts each
// row (see store.TakeDeliveries).
func (e *Engine) Deliver(ctx context.Context, o DeliveryOptions) {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
	take := func(ctx context.Context, now parley.Time, limit int) ([]*parley.Delivery, error) {
		return e.store.TakeDeliveries(ctx, store.TakeDeliveriesParams{Now: now, Until: parley.NewTime(now.Add(o.Lease)), Limit: limit})
	}
	pollDue(ctx, e, o.Poll, "the outbox", take, func(d *parley.Delivery) { e.deliver(ctx, o, d) })
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

func (e *Engine) deliver(ctx context.Context, o DeliveryOptions, d *parley.Delivery) {
	err := post(ctx, o, d)
	now := e.opts.Now()
	if err == nil {
		d.DeliveredAt, d.LastError = parley.NewTime(now), ""
		e.opts.Metrics.Deliveries.WithLabelValues("delivered").Inc()
	} else {
		d.Attempts++
		wait := min(time.Second<<min(d.Attempts-1, 20), o.MaxBackoff)
		d.NextAttemptAt, d.LastError = parley.NewTime(now.Add(wait)), err.Error()
		e.opts.Metrics.Deliveries.WithLabelValues("failed").Inc()
	}
	if uerr := e.store.UpdateDelivery(ctx, d); uerr != nil && ctx.Err() == nil {
		e.opts.Logger.Warn("recording a delivery failed", slog.String("message", d.MessageID), slog.Any("err", uerr))
	}
}

func post(ctx context.Context, o DeliveryOptions, d *parley.Delivery) error {
	url, ok := o.Webhooks[d.Channel.Type]
	if !ok {
		return fmt.Errorf("no webhook is configured for channel type %q", d.Channel.Type)
	}
	body, _ := json.Marshal(map[string]any{"conversationId": d.ConversationID, "messageId": d.MessageID, "channel": d.Channel, "content": d.Content})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", d.ID) // the server's, never a client's
	resp, err := o.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered HTTP %d", resp.StatusCode)
	}
	return nil
}
