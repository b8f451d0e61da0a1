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
// tokens and gains rate a second; an act (a creation, a runner's connect)
// takes one.
type rateLimiter struct {
	rate, burst float64
	// acts says what is counted, for the refusal: "create conversations
	// and tasks".
	acts    string
	mu      sync.Mutex
	buckets map[string]bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// newRateLimiter returns a limiter of acts, or nil for no bound (rate ≤ 0).
func newRateLimiter(rate float64, burst int, acts string) *rateLimiter {
	if rate <= 0 {
		return nil
	}
	return &rateLimiter{rate: rate, burst: float64(burst), acts: acts, buckets: make(map[string]bucket)}
}

// allow takes one act from who's bucket now, or returns ERATELIMITED
// saying when to retry (retryAfterSeconds, for Retry-After). A nil
// limiter allows everything.
func (l *rateLimiter) allow(who parley.Identity) error {
	return l.allowKey(who.TokenID, "this token")
}

// allowKey is allow for the bucket of key (a token's id, a client's
// address), which the refusal calls whose.
func (l *rateLimiter) allowKey(key, whose string) error {
	if l == nil {
		return nil
	}
	wait, ok := l.take(key, time.Now())
	if ok {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	return parley.Errorf(parley.ERATELIMITED, "%s may %s %g times a second (%d at once); retry in %d s",
		whose, l.acts, l.rate, int(l.burst), secs).With("retryAfterSeconds", secs)
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

// limited refuses a request over its identity's rate (see rateLimiter)
// with 429 rate_limited and Retry-After, before anything else: before the
// body is decoded, before a conversation is looked up.
func (s *Server) limited(l *rateLimiter, h handler) handler {
	if l == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, who parley.Identity) {
		if err := l.allow(who); err != nil {
			s.refuse(w, r, err)
			return
		}
		h(w, r, who)
	}
}

// setRetryAfter sets the Retry-After header of an error that says when to
// retry.
func setRetryAfter(w http.ResponseWriter, err error) {
	if secs, ok := retryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
}

// retryAfter is how many seconds an error says to wait before a retry
// (its detail retryAfterSeconds), if it says.
func retryAfter(err error) (secs int, ok bool) {
	var e *parley.Error
	if errors.As(err, &e) {
		secs, ok = e.Details["retryAfterSeconds"].(int)
	}
	return secs, ok
}
