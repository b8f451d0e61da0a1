package api

import (
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/parleyhq/parley"
)

// Guards are the server's protections of who may connect and of what a
// connection may hold: open mode's checks, the bound on reading a request
// body, and the per-token quotas. Zero values take the defaults.
type Guards struct {
	// OpenHosts are the Host names (without port) an open server answers
	// besides localhost, 127.0.0.1 and [::1]; any other Host is refused,
	// so that a web page whose name was rebound to this machine cannot
	// reach it.
	OpenHosts []string
	// BodyTimeout is how long a request may take to send its body (default
	// 30s); an import, which streams, may instead go this long without
	// sending a byte. Past it the connection is closed.
	BodyTimeout time.Duration
	// CreateRate is how many conversations and tasks one token may create a
	// second, on average (0: no bound); CreateBurst how many at once
	// (default: the larger of 1 and CreateRate). Over it: 429 rate_limited
	// with Retry-After. An open server is one identity.
	CreateRate  float64
	CreateBurst int
	// MaxConnsPerToken bounds the streams and runner connections one token
	// has open at once (0: no bound). Over it: 429 rate_limited.
	MaxConnsPerToken int
	// RunnerConnectRate is how many runner connections (of a conversation,
	// or agent-wide) one token may open a second, on average (0: no
	// bound); RunnerConnectBurst how many at once (default: the larger of
	// 1 and RunnerConnectRate). Over it: 429 rate_limited with
	// Retry-After, before the handshake. A connect costs more than most
	// requests (an agent-wide runner's guides every conversation of its
	// agent), so a client that reconnects in a loop is held back.
	RunnerConnectRate  float64
	RunnerConnectBurst int
	// SignInRate is how many sign-ins (POST /v1/session, good or bad) one
	// client address may make a second, on average (default 1; negative:
	// no bound); SignInBurst how many at once (default 10). Over it: 429
	// rate_limited with Retry-After, before the token is looked at.
	SignInRate  float64
	SignInBurst int
	// TokenRecheck is how often WatchTokens reads the tokens again (default
	// 2s): a token revoked elsewhere loses its connections within it.
	TokenRecheck time.Duration
	// MaxBodyMemory bounds the bytes of the request bodies read at once,
	// in all (default 256 MiB): each reserves its size (an import, the
	// most one JSON value of it may take) before any of it is read, and
	// gives it back once decoded. Past it: 503 unavailable with
	// Retry-After, and the body is not read.
	MaxBodyMemory int64
}

// DefaultMaxBodyMemory is the default Guards.MaxBodyMemory: sixteen of
// the largest chat bodies.
const DefaultMaxBodyMemory = 256 << 20

func (g *Guards) setDefaults() {
	if g.BodyTimeout <= 0 {
		g.BodyTimeout = 30 * time.Second
	}
	if g.CreateBurst <= 0 {
		g.CreateBurst = max(1, int(g.CreateRate))
	}
	if g.RunnerConnectBurst <= 0 {
		g.RunnerConnectBurst = max(1, int(g.RunnerConnectRate))
	}
	if g.SignInRate == 0 {
		g.SignInRate = 1
	}
	if g.SignInBurst <= 0 {
		g.SignInBurst = 10
	}
	if g.TokenRecheck <= 0 {
		g.TokenRecheck = 2 * time.Second
	}
	if g.MaxBodyMemory <= 0 {
		g.MaxBodyMemory = DefaultMaxBodyMemory
	}
}

// checkOpen refuses what a web page could make a browser send to an open
// server, where every request acts as an admin: a Host other than a
// loopback name (DNS rebinding), another origin (an Origin header that
// does not name the Host, or Sec-Fetch-Site cross-site or same-site), and
// a body not sent as application/json (the content types a page may send
// anywhere without asking: forms and text/plain).
func (s *Server) checkOpen(r *http.Request) error {
	if !s.openHost(r.Host) {
		return parley.Errorf(parley.EFORBIDDEN, "this server runs open (every request acts as admin), so it answers only requests addressed to localhost, 127.0.0.1 or [::1], not %q; "+
			"name it with serve -open-host, or create a token with 'parley token create -kind admin'", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		return parley.Errorf(parley.EFORBIDDEN, "this server runs open (every request acts as admin), so it refuses requests from other origins (Origin %q): a web page could act as admin; "+
			"create a token to serve a browser application from elsewhere", o)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return parley.Errorf(parley.EFORBIDDEN, "this server runs open (every request acts as admin), so it refuses requests a browser marks as from another site (Sec-Fetch-Site: %s)", site)
	}
	if hasBody(r) && !isJSON(r.Header.Get("Content-Type")) {
		return parley.Errorf(parley.EMEDIATYPE, "this server runs open, so it takes a request body only as Content-Type: application/json, not %q: "+
			"send that header (curl: --json, or -H 'Content-Type: application/json')", r.Header.Get("Content-Type"))
	}
	return nil
}

// guarded applies the checks of checkOpen to an endpoint that needs no
// token, while the server runs open: a page must not read an open
// server's answers anywhere.
func (s *Server) guarded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.open.Load() {
			if err := s.checkOpen(r); err != nil {
				s.refuse(w, r, err)
				return
			}
		}
		h(w, r)
	}
}

// openHost reports whether an open server answers requests addressed to
// host (the Host header, with or without a port).
func (s *Server) openHost(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"))
	switch name {
	case "localhost", "127.0.0.1", "::1":
		return true
	case "":
		return false
	}
	for _, h := range s.opts.OpenHosts {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether an Origin header names the host the request
// was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// isJSON reports whether a Content-Type is application/json (parameters,
// such as charset, allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// hasBody reports whether a request says it sends a body.
func hasBody(r *http.Request) bool { return r.ContentLength != 0 }

// refuse answers err without reading the request's body: a request with a
// body gets "Connection: close" and no more of it is read (not even to
// drain it for the next request), so that a client that sends a body
// slowly, or a huge one, holds nothing once refused.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if hasBody(r) {
		noDrain(w)
	}
	writeErr(w, s.log, err)
}

// boundBody gives a request that sends a body BodyTimeout to send it: past
// that its reads fail and the connection closes. An import moves the
// deadline as its data arrives (idleReader).
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if hasBody(r) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	}
}

// bodyRead lifts the body's deadline once all of it was read: the server
// then reads the connection in the background to notice the client
// leaving, and that read failing at the deadline would cancel a request
// that takes longer than BodyTimeout to answer.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// idleReader reads a body that may take long but must keep coming: each
// read may wait at most idle for data.
type idleReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	_ = i.rc.SetReadDeadline(time.Now().Add(i.idle))
	n, err := i.r.Read(p)
	if err == io.EOF {
		_ = i.rc.SetReadDeadline(time.Time{}) // see bodyRead
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = parley.Errorf(parley.EINVALID, "the body stopped coming: nothing arrived for %s (serve -body-timeout)", i.idle)
	}
	return n, err
}
