package api

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/parleyhq/parley"
)

// maxBuckets bounds the identities whose creation rate is remembered; past
// it full buckets are forgotten first (forgetting one changes nothing),
// then any.
const maxBuckets = 100_000

// rateLimiter is a token bucket per identity: each holds up to burst
// tokens and gains rate a second; a creation takes one.
type rateLimiter struct {
	rate, burst float64
	mu          sync.Mutex
	buckets     map[string]bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// newRateLimiter returns a limiter, or nil for no bound (rate ≤ 0).
func newRateLimiter(rate float64, burst int) *rateLimiter {
	if rate <= 0 {
		return nil
	}
	return &rateLimiter{rate: rate, burst: float64(burst), buckets: make(map[string]bucket)}
}

// take takes a token from key's bucket at now. When there is none it
// takes nothing and says how long until there is one.
func (l *rateLimiter) take(key string, now time.Time) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, seen := l.buckets[key]
	if !seen {
		if len(l.buckets) >= maxBuckets {
			l.evict(now)
		}
		b = bucket{tokens: l.burst, at: now}
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(l.burst, b.tokens+d.Seconds()*l.rate)
		b.at = now
	}
	if b.tokens < 1 {
		l.buckets[key] = b
		return time.Duration((1 - b.tokens) / l.rate * float64(time.Second)), false
	}
	b.tokens--
	l.buckets[key] = b
	return 0, true
}

// evict forgets the buckets that are full again at now, and if none is,
// arbitrary ones, until there is room for one more.
func (l *rateLimiter) evict(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < maxBuckets {
			return
		}
		delete(l.buckets, k)
	}
}

// limited refuses a creation over its identity's rate (CreateRate) with
// 429 rate_limited and Retry-After, before the body is decoded.
func (s *Server) limited(h handler) handler {
	if s.creates == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, who parley.Identity) {
		if wait, ok := s.creates.take(who.TokenID, time.Now()); !ok {
			secs := int(math.Ceil(wait.Seconds()))
			writeErr(w, s.log, parley.Errorf(parley.ERATELIMITED, "this token may create %g conversations and tasks a second (%d at once); retry in %d s",
				s.creates.rate, int(s.creates.burst), secs).With("retryAfterSeconds", secs))
			return
		}
		h(w, r, who)
	}
}

// setRetryAfter sets the Retry-After header of an error that says when to
// retry (a detail retryAfterSeconds).
func setRetryAfter(w http.ResponseWriter, err error) {
	var e *parley.Error
	if errors.As(err, &e) {
		if secs, ok := e.Details["retryAfterSeconds"].(int); ok {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
	}
}
