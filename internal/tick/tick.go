// Package tick runs the background loops of a server at their pace: a
// function called every interval until a context ends.
package tick

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx ends, the first time one
// interval after it is called; a call that takes longer than the interval
// delays the next rather than piling calls up.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
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
