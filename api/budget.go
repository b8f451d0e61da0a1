package api

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
)

// The request bodies a server reads at once are bounded in bytes, all
// together (Guards.MaxBodyMemory): each body reserves its size before
// any of it is read, and gives it back once it is decoded. Without it,
// forty 16 MiB chat bodies at once took 515 MB, and a few hundred would
// take the server's memory.

// bodyBudget is the bytes of request bodies being read, and their bound.
type bodyBudget struct {
	max  int64
	used atomic.Int64
}

// Reserve takes n bytes of the budget, or none if fewer are left.
func (b *bodyBudget) Reserve(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release gives back n bytes reserved.
func (b *bodyBudget) Release(n int64) { b.used.Add(-n) }

// bodyRetryAfterSeconds is what a body refused for want of room in the
// budget is told to wait: bodies are read in seconds at most
// (BodyTimeout), most in much less.
const bodyRetryAfterSeconds = 1

// reserveBody reserves, before any of a request's body is read, what it
// may hold in memory at once: its Content-Length, or hold when it does not
// say (a chunked body) or says more. hold is max, the endpoint's bound,
// for a body decoded whole; less for one read as it streams (an import).
// A body that says it is over max is refused at once (413), and one for
// which the budget has no room now is refused with 503 unavailable and
// Retry-After; the connection of either is closed after the answer, and
// none of the body read. Call release with what it returns once the body
// is read.
func (s *Server) reserveBody(w http.ResponseWriter, r *http.Request, max, hold int64) (int64, error) {
	n := r.ContentLength
	switch {
	case n == 0:
		return 0, nil
	case n > max:
		noDrain(w)
		return 0, parley.Errorf(parley.ETOOLARGE, "the body is %d bytes, over the %d this endpoint takes", n, max)
	case n < 0 || n > hold:
		n = hold
	}
	if !s.bodies.Reserve(n) {
		noDrain(w)
		return 0, parley.Errorf(parley.EUNAVAILABLE, "the server is reading as many request bodies as it may at once (serve -max-body-memory); retry in %d s", bodyRetryAfterSeconds).
			With("retryAfterSeconds", bodyRetryAfterSeconds)
	}
	return n, nil
}

// noDrain has the server close the connection after the answer instead of
// reading what is left of the request's body (to drain it for the next
// request), so that a client that sends a body slowly, or a huge one,
// holds nothing once refused.
func noDrain(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
