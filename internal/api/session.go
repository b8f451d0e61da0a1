package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/parleyhq/parley"
)

// The cookies of a browser's session (see docs/security.md).
const (
	// sessionCookie holds the token the browser signed in with. It is
	// HttpOnly: no script of any page reads it.
	sessionCookie = "parley_session"
	// csrfCookie holds the session's CSRF proof (csrfProof), which the
	// page's scripts read and send back as csrfHeader on every write.
	csrfCookie = "parley_csrf"
	// csrfHeader carries the CSRF proof of a write made with the session
	// cookie.
	csrfHeader = "X-Parley-CSRF"
)

// signInRequest is the body of POST /v1/session.
type signInRequest struct {
	Token string `json:"token"`
}

// signIn checks a token and, if it is good, makes it the browser's
// session: the token in an HttpOnly cookie, and its CSRF proof in one the
// page reads. Attempts are bounded per client address (SignInRate).
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if err := checkSessionOrigin(r); err != nil {
		s.refuse(w, r, err)
		return
	}
	if err := s.signIns.allowKey(clientAddr(r), "this address"); err != nil {
		s.refuse(w, r, err)
		return
	}
	var req signInRequest
	if err := s.decodeBody(w, r, 4096, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	if req.Token == "" {
		writeErr(w, s.log, parley.Errorf(parley.EINVALIDVALUE, "token is required: the secret of a token (pk_…)"))
		return
	}
	who, err := s.tokens.Authenticate(r.Context(), req.Token)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	secure := secureRequest(r)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: req.Token, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrfProof(req.Token), Path: "/", Secure: secure, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, identityBody(who, true))
}

// signOut ends the browser's session: both cookies are cleared. It needs
// no token (a revoked one's cookie must be clearable too), but refuses
// another origin.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	if err := checkSessionOrigin(r); err != nil {
		s.refuse(w, r, err)
		return
	}
	secure := secureRequest(r)
	for _, c := range []*http.Cookie{
		{Name: sessionCookie, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: -1},
		{Name: csrfCookie, Path: "/", Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: -1},
	} {
		http.SetCookie(w, c)
	}
	w.WriteHeader(http.StatusNoContent)
}

// identityBody is the JSON answer of whoami and of a sign-in.
func identityBody(who parley.Identity, cookie bool) map[string]any {
	return map[string]any{"kind": who.Kind, "agentId": who.AgentID, "open": who.Open, "cookie": cookie}
}

// cookieSecret returns the token of the request's session cookie, if any.
func cookieSecret(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

// checkCookieRequest refuses a request authenticated by the session
// cookie that another origin may have made the browser send: any with an
// Origin header other than the server's own (a cross-site WebSocket or
// EventSource too, whatever OriginPatterns allows for bearer tokens), and
// any write (not GET or HEAD) without the session's CSRF proof in the
// X-Parley-CSRF header.
func checkCookieRequest(r *http.Request, secret string) error {
	if err := checkSessionOrigin(r); err != nil {
		return err
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		return parley.Errorf(parley.ECSRF, "a request signed in by the session cookie must send the %s header, holding the value of the %s cookie", csrfHeader, csrfCookie)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(csrfProof(secret))) != 1 {
		return parley.Errorf(parley.ECSRF, "the %s header does not match this session: sign in again", csrfHeader)
	}
	return nil
}

// checkSessionOrigin refuses a request whose Origin header names another
// origin than the server's own.
func checkSessionOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		return parley.Errorf(parley.ECSRF, "a request from another origin (Origin %q) may not use or change this server's session cookie; send a bearer token instead", o)
	}
	return nil
}

// csrfProof is the CSRF proof of a session: an HMAC-SHA256 of a fixed
// label keyed by the session's token. Only whoever holds the token (the
// server, and the HttpOnly cookie) can make it, so a page of a sibling
// domain that sets cookies cannot forge a proof for someone else's
// session; and it needs no key of the server's own, so it survives a
// restart and holds across the nodes of a cluster.
func csrfProof(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("parley csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// secureRequest reports whether the browser reached the server over TLS:
// the connection is TLS, or the page's Origin is https (a proxy in front
// ended TLS; the server trusts no X-Forwarded-Proto). The cookies are then
// Secure.
func secureRequest(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && strings.EqualFold(u.Scheme, "https")
}

// clientAddr is the address (without port) the request came from; the
// server trusts no X-Forwarded-For.
func clientAddr(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// byCookieKey marks a request's context as signed in by the session cookie.
type byCookieKey struct{}

// byCookie reports whether the request was signed in by the session cookie.
func byCookie(r *http.Request) bool {
	v, _ := r.Context().Value(byCookieKey{}).(bool)
	return v
}

// withCookie returns r marked as signed in by the session cookie.
func withCookie(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), byCookieKey{}, true))
}
