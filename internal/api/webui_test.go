package api_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/webui"
)

// TestServesTheUI: a server that requires tokens serves the web UI without
// one: "/" and a conversation's page answer index.html (revalidated every
// time), the files it names are served immutable, an unknown file is the
// API's JSON 404, and every answer carries the security headers. The API
// around it answers as before: tokens still required, unknown endpoints
// still its own 404 and 405.
func TestServesTheUI(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	index := ""
	for _, path := range []string{"/", "/c/" + id, "/c/not-a-conversation-yet", "/index.html"} {
		r := b.do("GET", path, "", nil)
		if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" || r.header.Get("Cache-Control") != "no-cache" || r.header.Get("ETag") == "" {
			t.Fatalf("GET %s: %d %q %q, ETag %q", path, r.status, r.header.Get("Content-Type"), r.header.Get("Cache-Control"), r.header.Get("ETag"))
		}
		uiHeaders(t, "GET "+path, r)
		if index != "" && string(r.raw) != index {
			t.Fatalf("GET %s is not index.html", path)
		}
		index = string(r.raw)
	}
	if r := b.do("HEAD", "/c/"+id, "", nil); r.status != 200 || len(r.raw) != 0 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("HEAD /c/{id}: %d with %d bytes", r.status, len(r.raw))
	}
	if r := b.do("GET", "/", "", nil, "If-None-Match", b.do("GET", "/", "", nil).header.Get("ETag")); r.status != 304 || len(r.raw) != 0 {
		t.Fatalf("revalidating index.html: %d with %d bytes, want 304", r.status, len(r.raw))
	}
	assets := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(index, -1)
	if len(assets) == 0 {
		t.Fatalf("index.html names no asset: %s", index)
	}
	for _, m := range assets {
		r := b.do("GET", m[1], "", nil)
		if r.status != 200 || r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" || !strings.Contains(r.header.Get("Content-Type"), "/") {
			t.Fatalf("GET %s: %d %q %q", m[1], r.status, r.header.Get("Content-Type"), r.header.Get("Cache-Control"))
		}
		uiHeaders(t, "GET "+m[1], r)
	}
	for _, path := range []string{"/assets/index-00000000.js", "/assets/", "/c/" + id + "/more"} {
		r := b.do("GET", path, "", nil)
		b.want(r, 404, "not_found")
		if path != "/c/"+id+"/more" { // that one no UI route matches: the API's 404
			uiHeaders(t, "GET "+path, r)
		}
	}
	b.want(b.do("POST", "/", "", `{}`), 405, "method_not_allowed")
	b.want(b.do("DELETE", "/c/"+id, "", nil), 405, "method_not_allowed")

	// The API is unaffected: tokens, its 404s and 405s, its operations.
	b.want(b.do("GET", "/v1/conversations", "", nil), 401, "unauthorized")
	b.want(b.do("GET", "/v1/conversations/"+id, b.viewer, nil), 200, "")
	b.want(b.do("GET", "/v1/nope", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/", b.viewer, nil), 404, "not_found")
	b.want(b.do("POST", "/v1/nope", b.viewer, `{}`), 404, "not_found")
	b.want(b.do("GET", "/healthz", "", nil), 200, "")
	if r := b.do("GET", "/v1/conversations/"+id, b.viewer, nil); r.header.Get("Content-Security-Policy") != "" {
		t.Fatal("the API's JSON answers carry the UI's policy")
	}
}

// TestOpenServerUI: an open server serves its UI to its own names and
// pages, and refuses it, as every other route, to another Host (a page
// whose name was rebound to this machine) and to another site's requests,
// with the security headers on the refusal too.
func TestOpenServerUI(t *testing.T) {
	t.Parallel()
	f := openFixture(t)
	port := f.url[strings.LastIndexByte(f.url, ':'):]
	for _, h := range [][]string{nil, {"Host", "localhost" + port}, {"Host", "[::1]" + port}, {"Sec-Fetch-Site", "none"}, {"Origin", f.url, "Sec-Fetch-Site", "same-origin"}} {
		for _, path := range []string{"/", "/c/" + f.c} {
			if r := f.do("GET", path, "", nil, h...); r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("GET %s with %v: %d %q", path, h, r.status, r.header.Get("Content-Type"))
			}
		}
	}
	evil := "evil.example" + port
	for _, h := range [][]string{{"Host", evil}, {"Host", "evil.example"}, {"Host", "127.0.0.2" + port}, {"Host", evil, "Origin", "http://" + evil},
		{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}} {
		for _, path := range []string{"/", "/c/" + f.c, "/index.html", "/assets/nope.js", "/v1/conversations"} {
			r := f.do("GET", path, "", nil, h...)
			f.want(r, 403, "forbidden")
			if path != "/v1/conversations" {
				uiHeaders(t, "refused "+path, r)
			}
		}
	}
}

// uiHeaders checks the security headers of an answer on a UI route.
func uiHeaders(t *testing.T, what string, r response) {
	t.Helper()
	for k, v := range map[string]string{"Content-Security-Policy": webui.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %s %q, want %q", what, k, got, v)
		}
	}
}
