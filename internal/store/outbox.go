package store

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

// LeasedDeliveries puts the rows a TakeDeliveries read in the order it
// promises (oldest attempt first: an UPDATE … RETURNING returns them in no
// set order) and marks them leased until until. Stores share it.
func LeasedDeliveries(ds []*parley.Delivery, until parley.Time) []*parley.Delivery {
	slices.SortFunc(ds, func(a, b *parley.Delivery) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt.Time), cmp.Compare(a.ID, b.ID))
	})
	for _, d := range ds {
		d.NextAttemptAt = until
	}
	return ds
}

// DecodeDelivery reads an outbox row's data. A row written before rows had
// a status gets the one it has: delivered once delivered, else pending.
func DecodeDelivery(data []byte) (*parley.Delivery, error) {
	d := &parley.Delivery{}
	if err := json.Unmarshal(data, d); err != nil {
		return nil, err
	}
	if d.Status == "" {
		d.Status = parley.DeliveryPending
		if !d.DeliveredAt.IsZero() {
			d.Status = parley.DeliveryDelivered
		}
	}
	return d, nil
}

// DeliveryRow is what a backend writes of a delivery besides its data:
// its status, whether it is done (delivered or given up: 1, and no take
// takes it again; else 0: its delivered column), and when it was done.
func DeliveryRow(d *parley.Delivery) (status parley.DeliveryStatus, done int, doneAt parley.Time) {
	switch {
	case d.Status == parley.DeliveryFailed:
		return d.Status, 1, d.GaveUpAt
	case !d.DeliveredAt.IsZero():
		return parley.DeliveryDelivered, 1, d.DeliveredAt
	}
	return parley.DeliveryPending, 0, parley.Time{}
}

// ReadDeliveries reads the outbox rows of a ListDeliveries query, ending
// after the one that brings their content to maxBytes (0: no bound).
func ReadDeliveries(rows Rows, maxBytes int) ([]*parley.Delivery, error) {
	out, size := []*parley.Delivery{}, 0
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		d, err := DecodeDelivery(data)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
		if size += len(data); maxBytes > 0 && size >= maxBytes {
			break // the rest waits for the next page
		}
	}
	return out, rows.Err()
}
