package postgres

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// TakeDeliveries implements store.Store. Rows that another node's take
// holds locked are skipped (FOR UPDATE SKIP LOCKED), and the lease
// written in the same statement keeps later takes off them.
func (db *DB) TakeDeliveries(ctx context.Context, p store.TakeDeliveriesParams) ([]*parley.Delivery, error) {
	rows, err := db.pool.Query(ctx, `UPDATE outbox SET next_attempt_at = $3 WHERE id IN (
		SELECT id FROM outbox WHERE delivered = 0 AND next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING data`, p.Now.Time, clampLimit(p.Limit), p.Until.Time)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out, err := store.ReadDeliveries(rows, 0)
	if err != nil {
		return nil, err
	}
	return store.LeasedDeliveries(out, p.Until), nil
}

// UpdateDelivery implements store.Store.
func (db *DB) UpdateDelivery(ctx context.Context, d *parley.Delivery) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	status, done, doneAt := store.DeliveryRow(d)
	var doneTime any // NULL while pending
	if done == 1 {
		doneTime = doneAt.Time
	}
	tag, err := db.pool.Exec(ctx, `UPDATE outbox SET data = $1, delivered = $2, status = $3, done_at = $4, next_attempt_at = $5 WHERE id = $6`,
		string(data), done, string(status), doneTime, d.NextAttemptAt.Time, d.ID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return parley.Errorf(parley.ENOTFOUND, "delivery %s not found", d.ID)
	}
	return nil
}

// ListDeliveries implements store.Store.
func (db *DB) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]*parley.Delivery, error) {
	rows, err := db.pool.Query(ctx, `SELECT data FROM outbox WHERE id > $1 AND ($2 = '' OR status = $2) ORDER BY id LIMIT $3`,
		p.After, string(p.Status), clampLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadDeliveries(rows, p.MaxBytes)
}

// PruneDeliveries implements store.Store.
func (db *DB) PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int, error) {
	tag, err := db.pool.Exec(ctx, `DELETE FROM outbox WHERE id IN (
		SELECT id FROM outbox WHERE done_at IS NOT NULL AND done_at < $1 ORDER BY done_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, p.Before.Time, clampLimit(p.Limit))
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
