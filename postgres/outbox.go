package postgres

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
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
	var out []*parley.Delivery
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		d := &parley.Delivery{}
		if err := json.Unmarshal([]byte(data), d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
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
	delivered := 0
	if !d.DeliveredAt.IsZero() {
		delivered = 1
	}
	tag, err := db.pool.Exec(ctx, `UPDATE outbox SET data = $1, delivered = $2, next_attempt_at = $3 WHERE id = $4`,
		string(data), delivered, d.NextAttemptAt.Time, d.ID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return parley.Errorf(parley.ENOTFOUND, "delivery %s not found", d.ID)
	}
	return nil
}
