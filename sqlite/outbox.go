package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/parleyhq/parley"
)

// DueDeliveries implements store.Store.
func (db *DB) DueDeliveries(ctx context.Context, now parley.Time, limit int) ([]*parley.Delivery, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT data FROM outbox WHERE delivered = 0 AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`,
		formatTime(now), clampLimit(limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*parley.Delivery
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		d := &parley.Delivery{}
		if err := json.Unmarshal(data, d); err != nil {
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
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET data = ?, delivered = ?, next_attempt_at = ? WHERE id = ?`,
			data, delivered, formatTime(d.NextAttemptAt), d.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return parley.Errorf(parley.ENOTFOUND, "delivery %s not found", d.ID)
		}
		return nil
	})
}
