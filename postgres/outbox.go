package postgres

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
)

// DueDeliveries implements store.Store.
func (db *DB) DueDeliveries(ctx context.Context, now parley.Time, limit int) ([]*parley.Delivery, error) {
	rows, err := db.pool.Query(ctx, `SELECT data FROM outbox WHERE delivered = 0 AND next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $2`,
		now.Time, clampLimit(limit))
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
	return out, rows.Err()
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
