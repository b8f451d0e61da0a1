package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// openFixture is a server running open (its store holds tokens only so
// that the checks can read everything back as an admin) with conversation
// c (alice, carol).
func openFixture(t *testing.T) *badFixture {
	t.Helper()
	b := setup(t, engine.Options{}, api.Options{Open: true})
	id := b.conversation("alice", "carol")
	return &badFixture{bundle: b, c: id, c2: id, c3: id}
}

// TestOpenModeRefusesWebPages: a server running open (where every request
// acts as an admin) refuses, on every endpoint (those that need no token
// too), what a web page could make a browser send —
// another origin (Origin, Sec-Fetch-Site), a name other than a loopback
// one in Host (DNS rebinding), a body sent as a form or text/plain (a
// "simple" request, sent without asking) — with 403 or 415, and writes
// nothing: a cross-site POST /v1/tokens does not lock the operator out.
func TestOpenModeRefusesWebPages(t *testing.T) {
	t.Parallel()
	f := openFixture(t)
	port := f.url[strings.LastIndexByte(f.url, ':'):]
	evil := "http://evil.example"
	conv := `{"title":"csrf"}`
	msg := `{"agentId":"alice","content":"csrf"}`
	var cases []badCase
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "application/jsonx", "text/json"} {
		cases = append(cases,
			badCase{"body as " + ct, "POST", "/v1/conversations", "none", conv, []string{"Content-Type", ct}, 415, "unsupported_media_type", "application/json"},
			badCase{"message as " + ct, "POST", "/v1/conversations/{c}/messages", "none", msg, []string{"Content-Type", ct}, 415, "unsupported_media_type", "application/json"})
	}
	for _, origin := range []string{evil, "null", "http://127.0.0.1:1", "http://localhost" + port + ".evil.example", "file://"} {
		cases = append(cases,
			badCase{"Origin " + origin, "POST", "/v1/conversations", "none", conv, []string{"Origin", origin}, 403, "forbidden", "Origin"},
			badCase{"Origin " + origin + " reading", "GET", "/v1/conversations", "none", "", []string{"Origin", origin}, 403, "forbidden", "Origin"})
	}
	for _, site := range []string{"cross-site", "same-site"} {
		cases = append(cases,
			badCase{"Sec-Fetch-Site " + site, "GET", "/v1/conversations/{c}", "none", "", []string{"Sec-Fetch-Site", site}, 403, "forbidden", site},
			badCase{"Sec-Fetch-Site " + site + " writing", "POST", "/v1/conversations/{c}/messages", "none", msg, []string{"Sec-Fetch-Site", site}, 403, "forbidden", site})
	}
	for _, host := range []string{"evil.example" + port, "evil.example", "localhost.evil.example" + port, "127.0.0.2" + port, "10.0.0.1" + port, "[::2]" + port, "0.0.0.0" + port} {
		cases = append(cases,
			badCase{"Host " + host, "GET", "/v1/conversations", "none", "", []string{"Host", host}, 403, "forbidden", "localhost"},
			badCase{"Host " + host + ", same origin", "POST", "/v1/conversations", "none", conv, []string{"Host", host, "Origin", "http://" + host}, 403, "forbidden", "localhost"})
	}
	cases = append(cases,
		badCase{"cross-site token", "POST", "/v1/tokens", "none", `{"kind":"admin"}`, []string{"Origin", evil, "Content-Type", "text/plain"}, 403, "forbidden", "Origin"},
		badCase{"cross-site token as a form", "POST", "/v1/tokens", "none", `{"kind":"admin"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		badCase{"cross-site delete", "DELETE", "/v1/conversations/{c}", "none", "", []string{"Origin", evil}, 403, "forbidden", "Origin"},
		badCase{"rebound delete", "DELETE", "/v1/conversations/{c}", "none", "", []string{"Host", "evil.example" + port}, 403, "forbidden", ""},
		badCase{"rebound metrics", "GET", "/metrics", "none", "", []string{"Host", "evil.example" + port}, 403, "forbidden", ""},
		badCase{"rebound UI", "GET", "/c/{c}", "none", "", []string{"Host", "evil.example" + port}, 403, "forbidden", ""},
		badCase{"cross-site UI", "GET", "/", "none", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "forbidden", ""},
		badCase{"cross-site health", "GET", "/healthz", "none", "", []string{"Origin", evil}, 403, "forbidden", ""},
		badCase{"cross-site readiness", "GET", "/readyz", "none", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "forbidden", ""},
		badCase{"cross-site import", "POST", "/v1/conversations/import", "none", `{}`, []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}, 403, "forbidden", ""},
	)
	f.run(t, cases)

	// WebSocket upgrades: streams and the runners (of one conversation, and
	// of an agent in all of its), from another origin or to another name,
	// are refused before the upgrade.
	before := f.snapshot()
	for _, path := range []string{"/v1/conversations/" + f.c + "/ws", "/v1/conversations/" + f.c + "/runner?agentId=carol", "/v1/agents/carol/runner"} {
		for _, h := range [][]string{{"Origin", evil}, {"Origin", "null"}, {"Host", "evil.example" + port}, {"Host", "evil.example" + port, "Origin", "http://evil.example" + port}} {
			if status, code := f.dialOpen(path, h...); status != 403 || code != "forbidden" {
				t.Errorf("upgrade %s with %v: %d %q, want 403 forbidden", path, h, status, code)
			}
		}
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("a refused upgrade wrote something:\nbefore %s\nafter  %s", before, after)
	}
}

// TestOpenModeServesItsOwn: the same server serves clients that send no
// Origin (curl, programs), its own origin's pages, a loopback name with or
// without the port, and JSON bodies with parameters; its WebSockets too.
func TestOpenModeServesItsOwn(t *testing.T) {
	t.Parallel()
	f := openFixture(t)
	port := f.url[strings.LastIndexByte(f.url, ':'):]
	conv := map[string]any{"title": "mine"}
	for _, h := range [][]string{
		nil,
		{"Origin", f.url},
		{"Origin", f.url, "Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "none"},
		{"Content-Type", "application/json; charset=utf-8"},
		{"Host", "localhost" + port},
		{"Host", "LOCALHOST"},
		{"Host", "[::1]" + port, "Origin", "http://[::1]" + port},
		{"Host", "[::1]"},
		{"Host", "127.0.0.1"},
	} {
		f.want(f.do("POST", "/v1/conversations", "", conv, h...), 201, "")
		f.want(f.do("GET", "/v1/conversations/"+f.c, "", nil, h...), 200, "")
		f.want(f.do("GET", "/healthz", "", nil, h...), 200, "")
	}
	// Requests without a body need no content type.
	f.want(f.do("POST", "/v1/conversations/"+f.c+"/abort", "", nil), 404, "not_found")
	for _, path := range []string{"/v1/conversations/" + f.c + "/ws", "/v1/conversations/" + f.c + "/runner?agentId=carol", "/v1/agents/carol/runner"} {
		for _, h := range []http.Header{{}, {"Origin": {f.url}}} {
			c, _, err := websocket.Dial(f.ctx, "ws"+strings.TrimPrefix(f.url, "http")+path, &websocket.DialOptions{HTTPHeader: h})
			if err != nil {
				t.Fatalf("upgrade %s with %v: %v", path, h, err)
			}
			c.CloseNow()
		}
	}
}

// TestOpenModeEndsItsConnections: once a token is made, the streams and
// runners an open server let in without one end, unauthorized.
func TestOpenModeEndsItsConnections(t *testing.T) {
	t.Parallel()
	f := openFixture(t)
	open := f.liveConns(f.c, "")
	f.want(f.do("POST", "/v1/tokens", "", map[string]any{"kind": "admin"}), 201, "")
	open.wantCutOff(t, time.Second, "requires a token")
}

// dialOpen dials a WebSocket without a token, with extra headers (Host is
// sent as the request's Host), and returns the refusal's status and code.
func (b *bundle) dialOpen(path string, header ...string) (int, string) {
	b.t.Helper()
	h, host := http.Header{}, ""
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			host = header[i+1]
			continue
		}
		h.Set(header[i], header[i+1])
	}
	c, resp, err := websocket.Dial(b.ctx, "ws"+strings.TrimPrefix(b.url, "http")+path, &websocket.DialOptions{HTTPHeader: h, Host: host})
	if err == nil {
		c.CloseNow()
		return 101, ""
	}
	if resp == nil {
		b.t.Fatalf("dial %s: %v", path, err)
	}
	return resp.StatusCode, errorCode(resp)
}
