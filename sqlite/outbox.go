package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
)

// TakeDeliveries implements store.Store: the one writer reads the due rows
// and writes their lease in one transaction.
func (db *DB) TakeDeliveries(ctx context.Context, p store.TakeDeliveriesParams) ([]*parley.Delivery, error) {
	var out []*parley.Delivery
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE id IN (
			SELECT id FROM outbox WHERE delivered = 0 AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?)
			RETURNING data`, formatTime(p.Until), formatTime(p.Now), clampLimit(p.Limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var data []byte
			if err := rows.Scan(&data); err != nil {
				return err
			}
			d := &parley.Delivery{}
			if err := json.Unmarshal(data, d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
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
