package api

import (
	"io"
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
// holds nothing once refused. The answer is not held back for the body:
// what the client still sends is discarded for a moment after it (see
// linger), so that the client reads the answer rather than a reset.
func noDrain(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// Lingering: a connection closed while its client is still sending a body
// is reset, and a reset makes the client's system drop what it received
// and had not read yet, the answer that said why (TCP's rule; nginx's
// lingering_close is the usual answer). So after a refusal that left a
// body unread, what the client still sends is read and thrown away, for
// at most lingerTime and lingerBytes (no memory is held: it is not kept),
// and only then is the connection closed.
const (
	lingerTime  = time.Second
	lingerBytes = 64 << 20
)

// linger discards, once the answer to r is sent, what its client still
// sends of a body the answer refused unread (noDrain), within lingerTime
// and lingerBytes, then closes the connection. It takes the connection
// over from the HTTP server to read it as it comes (the body's reader
// would ask a client that waits to be told to send, Expect:
// 100-continue, to send it after all); over HTTP/2, where a refused
// stream is reset on its own, it does nothing.
func linger(w http.ResponseWriter, r *http.Request) {
	if !hasBody(r) || w.Header().Get("Connection") != "close" || r.ProtoMajor != 1 {
		return
	}
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	c, buf, err := rc.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if err := buf.Flush(); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // the answer is whole: the client sees its end
	}
	if c.SetReadDeadline(time.Now().Add(lingerTime)) != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(buf, lingerBytes))
}
