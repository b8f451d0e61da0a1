package api_test

import (
	"bufio"
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// session is a browser's session cookies, as a sign-in set them.
type session struct {
	cookie, csrf *http.Cookie
}

// header is the Cookie header of the session.
func (s session) header() string {
	return "parley_session=" + s.cookie.Value + "; parley_csrf=" + s.csrf.Value
}

// signIn signs in with secret and returns the cookies set.
func (b *bundle) signIn(secret string, header ...string) session {
	b.t.Helper()
	r := b.do("POST", "/v1/session", "", map[string]any{"token": secret}, header...)
	b.want(r, 200, "")
	var s session
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		switch c.Name {
		case "parley_session":
			s.cookie = c
		case "parley_csrf":
			s.csrf = c
		}
	}
	if s.cookie == nil || s.csrf == nil {
		b.t.Fatalf("sign-in set %v, want parley_session and parley_csrf", r.header.Values("Set-Cookie"))
	}
	return s
}

// lockedBuffer is a log a server writes from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestSignInSetsTheSessionCookies: a good token gets the session cookie
// (the token, HttpOnly, SameSite=Strict, Path=/, no Max-Age, not Secure
// over plain HTTP but Secure when the page's origin is https) and the
// CSRF cookie (readable, bound to the token); whoami then says the
// request was signed in by the cookie. The token appears in no log line.
func TestSignInSetsTheSessionCookies(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	b := setup(t, engine.Options{}, api.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	s := b.signIn(b.alice)
	c := s.cookie
	if c.Value != b.alice || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 0 || !c.Expires.IsZero() || c.Secure {
		t.Fatalf("session cookie %+v", c)
	}
	if s.csrf.HttpOnly || s.csrf.SameSite != http.SameSiteStrictMode || s.csrf.Path != "/" || len(s.csrf.Value) < 40 || strings.Contains(b.alice, s.csrf.Value) {
		t.Fatalf("CSRF cookie %+v", s.csrf)
	}
	if other := b.signIn(b.bob); other.csrf.Value == s.csrf.Value {
		t.Fatal("two sessions got the same CSRF proof")
	}
	r := b.do("GET", "/v1/whoami", "", nil, "Cookie", s.header())
	b.want(r, 200, "")
	if r.body["kind"] != "agent" || r.body["agentId"] != "alice" || r.body["cookie"] != true {
		t.Fatalf("whoami by cookie: %s", r.raw)
	}
	if r := b.do("GET", "/v1/whoami", b.alice, nil); r.body["cookie"] != false {
		t.Fatalf("whoami by bearer: %s", r.raw)
	}
	// The Authorization header wins over the cookie.
	if r := b.do("GET", "/v1/whoami", b.viewer, nil, "Cookie", s.header()); r.body["kind"] != "viewer" || r.body["cookie"] != false {
		t.Fatalf("whoami by bearer with a cookie: %s", r.raw)
	}
	sec := b.signIn(b.alice, "Origin", b.url[:len("http")]+"s"+b.url[len("http"):])
	if !sec.cookie.Secure || !sec.csrf.Secure {
		t.Fatalf("signed in from an https origin: cookies %+v %+v, want Secure", sec.cookie, sec.csrf)
	}
	if strings.Contains(logs.String(), b.alice) || !strings.Contains(logs.String(), "/v1/session") {
		t.Fatalf("the log holds the token, or no sign-in:\n%s", logs.String())
	}
}

// TestSessionCookieNeedsCSRFToWrite: a GET by the cookie needs nothing
// more; a write needs X-Parley-CSRF equal to the CSRF cookie (missing or
// wrong: 403 csrf_failed, nothing written); another Origin is refused
// even with the right header, and even for a GET.
func TestSessionCookieNeedsCSRFToWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	s := b.signIn(b.alice)
	b.want(b.do("GET", "/v1/conversations/"+id, "", nil, "Cookie", s.header()), 200, "")
	post := func(header ...string) response {
		return b.do("POST", "/v1/conversations/"+id+"/messages", "", map[string]any{"content": "hi"}, append([]string{"Cookie", s.header()}, header...)...)
	}
	before := b.log(id)
	b.want(post(), 403, "csrf_failed")
	b.want(post("X-Parley-CSRF", "forged"), 403, "csrf_failed")
	b.want(post("X-Parley-CSRF", b.signIn(b.bob).csrf.Value), 403, "csrf_failed")
	b.want(post("X-Parley-CSRF", s.csrf.Value, "Origin", "https://evil.example"), 403, "csrf_failed")
	b.want(b.do("GET", "/v1/conversations/"+id, "", nil, "Cookie", s.header(), "Origin", "https://evil.example"), 403, "csrf_failed")
	if after := b.log(id); after != before {
		t.Fatalf("a refused write wrote:\nbefore %s\nafter  %s", before, after)
	}
	r := post("X-Parley-CSRF", s.csrf.Value, "Origin", b.url)
	b.want(r, 201, "")
	if m := r.body["message"].(map[string]any); m["agentId"] != "alice" {
		t.Fatalf("written as %v, want alice", m["agentId"])
	}
	// A bearer token needs no CSRF header, cookie or not.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": "by bearer"}, "Cookie", s.header()), 201, "")
}

// TestSignOutClearsTheCookies: DELETE /v1/session expires both cookies;
// another origin may not sign anyone out (or in).
func TestSignOutClearsTheCookies(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	s := b.signIn(b.viewer)
	b.want(b.do("DELETE", "/v1/session", "", nil, "Cookie", s.header(), "Origin", "https://evil.example"), 403, "csrf_failed")
	b.want(b.do("POST", "/v1/session", "", map[string]any{"token": b.admin}, "Origin", "https://evil.example"), 403, "csrf_failed")
	r := b.do("DELETE", "/v1/session", "", nil, "Cookie", s.header())
	b.want(r, 204, "")
	cleared := map[string]bool{}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.MaxAge < 0 && c.Value == "" {
			cleared[c.Name] = true
		}
	}
	if !cleared["parley_session"] || !cleared["parley_csrf"] {
		t.Fatalf("sign-out set %v, want both cookies expired", r.header.Values("Set-Cookie"))
	}
	// Without the cookie the browser is signed out.
	b.want(b.do("GET", "/v1/whoami", "", nil), 401, "unauthorized")
}

// TestSignInRefusesBadInput: a wrong token is 401 and sets no cookie; a
// body that is not the object {"token"} is 400, an empty token 422.
func TestSignInRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	for _, c := range []struct {
		body   any
		status int
		code   string
	}{
		{map[string]any{"token": "pk_nosuchtoken"}, 401, "unauthorized"},
		{map[string]any{"token": "not a token"}, 401, "unauthorized"},
		{map[string]any{"token": ""}, 422, "invalid_value"},
		{map[string]any{}, 422, "invalid_value"},
		{map[string]any{"token": b.admin, "extra": 1}, 400, "invalid_request"},
		{`{"token": 1}`, 400, "invalid_request"},
		{`not json`, 400, "invalid_request"},
		{`{"token":"` + strings.Repeat("x", 5000) + `"}`, 413, "too_large"},
	} {
		r := b.do("POST", "/v1/session", "", c.body)
		b.want(r, c.status, c.code)
		if sc := r.header.Values("Set-Cookie"); len(sc) != 0 {
			t.Fatalf("%v: a refused sign-in set %v", c.body, sc)
		}
	}
	b.want(b.do("GET", "/v1/whoami", "", nil, "Cookie", "parley_session=pk_nosuchtoken"), 401, "unauthorized")
}

// TestSignInIsRateLimited: past SignInBurst attempts from one address,
// good or bad, the next is 429 rate_limited with Retry-After, before the
// token is looked at; bearer requests are not counted.
func TestSignInIsRateLimited(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{SignInRate: 0.001, SignInBurst: 5}})
	for i := range 5 {
		b.want(b.do("POST", "/v1/session", "", map[string]any{"token": "pk_guess" + string(rune('a'+i))}), 401, "unauthorized")
	}
	r := b.do("POST", "/v1/session", "", map[string]any{"token": b.admin})
	b.want(r, 429, "rate_limited")
	if r.header.Get("Retry-After") == "" || r.header.Values("Set-Cookie") != nil {
		t.Fatalf("refused sign-in: Retry-After %q, Set-Cookie %v", r.header.Get("Retry-After"), r.header.Values("Set-Cookie"))
	}
	b.want(b.do("GET", "/v1/whoami", b.admin, nil), 200, "")
}

// TestRevokedTokenCookieStopsAtOnce: once the token is revoked its
// cookie is 401 and the streams it opened (SSE and WebSocket) end as a
// bearer token's do.
func TestRevokedTokenCookieStopsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob", "carol")
	secret, tok, err := b.tokens.CreateToken(b.ctx, parley.TokenViewer, "", "browser")
	if err != nil {
		t.Fatal(err)
	}
	s := b.signIn(secret)
	var l liveConns
	ws, _, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {s.header()}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	l.ws = ws
	if f := readFrame(t, b.ctx, ws); f["type"] != "init" {
		t.Fatalf("ws by cookie: first frame %v", f)
	}
	_, resp := b.openSSE(id, "", "Authorization", "", "Cookie", s.header())
	l.sse = sseFrames(bufio.NewReader(resp.Body))
	if ev, err := l.sse(); err != nil || ev.event != "init" {
		t.Fatalf("SSE by cookie: first event %v, %v", ev, err)
	}
	b.want(b.do("DELETE", "/v1/tokens/"+tok.ID, b.admin, nil), 204, "")
	b.want(b.do("GET", "/v1/whoami", "", nil, "Cookie", s.header()), 401, "unauthorized")
	l.wantCutOff(t, 5*time.Second, "revoked")
}

// TestForeignOriginCannotOpenAStreamByCookie: a page of another origin
// cannot open the conversation's WebSocket (or SSE stream) with the
// browser's cookie (cross-site WebSocket hijacking), even from an origin
// OriginPatterns lets in for bearer tokens; the server's own origin can.
func TestForeignOriginCannotOpenAStreamByCookie(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{OriginPatterns: []string{"*.example.com"}})
	id := b.conversation("alice", "bob")
	s := b.signIn(b.viewer)
	for _, origin := range []string{"https://evil.example", "https://app.example.com"} {
		_, resp, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {s.header()}, "Origin": {origin}}})
		if err == nil || resp == nil || resp.StatusCode != 403 {
			t.Fatalf("ws by cookie from %s: %v, %v; want 403", origin, resp, err)
		}
		sse := b.do("GET", "/v1/conversations/"+id+"/stream", "", nil, "Cookie", s.header(), "Origin", origin)
		b.want(sse, 403, "csrf_failed")
	}
	// With a bearer token an allowed origin still opens it.
	c, _, err := websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.viewer}, "Origin": {"https://app.example.com"}}})
	if err != nil {
		t.Fatalf("ws by bearer from an allowed origin: %v", err)
	}
	c.CloseNow()
	c, _, err = websocket.Dial(b.ctx, wsURL(b, id, ""), &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {s.header()}, "Origin": {b.url}}})
	if err != nil {
		t.Fatalf("ws by cookie from the server's origin: %v", err)
	}
	c.CloseNow()
}

// TestOpenServerIgnoresTheCookie: a session cookie left by another server
// at the same address does not lock a browser out of an open server, which
// answers it as any request without a token (its checks of another origin
// included).
func TestOpenServerIgnoresTheCookie(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Open: true}) // its tokens were made behind its back: it stays open
	stale := "parley_session=pk_fromanotherserver; parley_csrf=x"
	r := b.do("GET", "/v1/whoami", "", nil, "Cookie", stale)
	b.want(r, 200, "")
	if r.body["open"] != true || r.body["cookie"] != false {
		t.Fatalf("whoami on an open server with a stale cookie: %s", r.raw)
	}
	b.want(b.do("POST", "/v1/conversations", "", map[string]any{}, "Cookie", stale), 201, "")
	b.want(b.do("POST", "/v1/conversations", "", map[string]any{}, "Cookie", stale, "Origin", "https://evil.example"), 403, "forbidden")
}
