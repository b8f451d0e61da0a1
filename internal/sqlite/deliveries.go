package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// TakeDeliveries implements store.Store: the one writer reads the due rows
// and writes their lease in one transaction.
func (db *DB) TakeDeliveries(ctx context.Context, p store.TakeDeliveriesParams) ([]*parley.Delivery, error) {
	var out []*parley.Delivery
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE id IN (
			SELECT id FROM outbox WHERE delivered = 0 AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?)
			RETURNING data`, formatTime(p.Until), formatTime(p.Now), clampLimit(p.Limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = store.ReadDeliveries(rows, 0)
		return err
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
	status, done, doneAt := store.DeliveryRow(d)
	var doneText any // NULL while pending
	if done == 1 {
		doneText = formatTime(doneAt)
	}
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET data = ?, delivered = ?, status = ?, done_at = ?, next_attempt_at = ? WHERE id = ?`,
			data, done, string(status), doneText, formatTime(d.NextAttemptAt), d.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return parley.Errorf(parley.ENOTFOUND, "delivery %s not found", d.ID)
		}
		return nil
	})
}

// ListDeliveries implements store.Store.
func (db *DB) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]*parley.Delivery, error) {
	q, args := `SELECT data FROM outbox WHERE id > ?`, []any{p.After}
	if p.Status != "" {
		q, args = q+` AND status = ?`, append(args, string(p.Status))
	}
	rows, err := db.r.QueryContext(ctx, q+` ORDER BY id LIMIT ?`, append(args, clampLimit(p.Limit))...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ReadDeliveries(rows, p.MaxBytes)
}

// PruneDeliveries implements store.Store.
func (db *DB) PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int, error) {
	var n int64
	err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox WHERE done_at IS NOT NULL AND done_at < ? ORDER BY done_at LIMIT ?)`, formatTime(p.Before), clampLimit(p.Limit))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
