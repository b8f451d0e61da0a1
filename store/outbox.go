package store

import (
	"cmp"
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
