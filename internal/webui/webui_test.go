package webui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/parleyhq/parley/internal/webui"
)

// build is a small build as Vite lays it out, with files whose names the
// UI must not serve (they are the API's).
var build = fstest.MapFS{
	"index.html":                  {Data: []byte(`<!doctype html><script type="module" src="/assets/index-B-x3kQ9a.js"></script>`)},
	"favicon.svg":                 {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
	"assets/index-B-x3kQ9a.js":    {Data: []byte(`console.log("hi")`)},
	"assets/index-Cq_1zZ0p.css":   {Data: []byte(`body{}`)},
	"assets/inter-Dd81kLmN.woff2": {Data: []byte("wOF2")},
	"assets/notes.txt":            {Data: []byte("no hash in this name")},
	"assets/blob-Zz81kLmN.xyz":    {Data: []byte("\x00\x01")},
	"icons/app.png":               {Data: []byte("\x89PNG")},
	"v1/conversations":            {Data: []byte("shadowing the API")},
	"healthz":                     {Data: []byte("shadowing the API")},
}

func serve(t *testing.T, u *webui.UI, method, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	u.ServeHTTP(w, req)
	return w.Result()
}

// TestServesTheBuild: the application's routes answer index.html, files
// are served with their type and caching (immutable only for hashed names
// under assets/), a matching ETag is a 304, HEAD has no body, and anything
// else is the API's JSON 404 or 405; every answer has the security headers.
func TestServesTheBuild(t *testing.T) {
	u, err := webui.New(build)
	if err != nil {
		t.Fatal(err)
	}
	index := string(build["index.html"].Data)
	cases := []struct {
		method, path string
		status       int
		ctype, cache string
		body         string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", "no-cache", index},
		{"GET", "/c/01J9ZK", 200, "text/html; charset=utf-8", "no-cache", index},
		{"GET", "/c/a.b_c:d-e", 200, "text/html; charset=utf-8", "no-cache", index},
		{"GET", "/index.html", 200, "text/html; charset=utf-8", "no-cache", index},
		{"HEAD", "/c/x", 200, "text/html; charset=utf-8", "no-cache", ""},
		{"GET", "/tokens", 200, "text/html; charset=utf-8", "no-cache", index},
		{"GET", "/assets/index-B-x3kQ9a.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", `console.log("hi")`},
		{"GET", "/assets/index-Cq_1zZ0p.css", 200, "text/css; charset=utf-8", "public, max-age=31536000, immutable", `body{}`},
		{"GET", "/assets/inter-Dd81kLmN.woff2", 200, "font/woff2", "public, max-age=31536000, immutable", "wOF2"},
		{"HEAD", "/assets/index-B-x3kQ9a.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", ""},
		{"GET", "/assets/notes.txt", 200, "text/plain; charset=utf-8", "no-cache", "no hash in this name"},
		{"GET", "/assets/blob-Zz81kLmN.xyz", 200, "application/octet-stream", "public, max-age=31536000, immutable", "\x00\x01"},
		{"GET", "/favicon.svg", 200, "image/svg+xml", "no-cache", `<svg xmlns="http://www.w3.org/2000/svg"/>`},
		{"GET", "/icons/app.png", 200, "image/png", "no-cache", "\x89PNG"},
		{"GET", "/assets/index-XXXXXXXX.js", 404, "application/json", "no-store", ""},
		{"GET", "/assets/", 404, "application/json", "no-store", ""},
		{"GET", "/assets/../index.html", 404, "application/json", "no-store", ""},
		{"GET", "/c/", 404, "application/json", "no-store", ""},
		{"GET", "/c/x/y", 404, "application/json", "no-store", ""},
		{"GET", "/healthz", 404, "application/json", "no-store", ""},
		{"GET", "/v1/conversations", 404, "application/json", "no-store", ""},
		{"POST", "/", 405, "application/json", "no-store", ""},
	}
	for _, c := range cases {
		resp := serve(t, u, c.method, c.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.ctype || resp.Header.Get("Cache-Control") != c.cache {
			t.Errorf("%s %s: %d %q %q, want %d %q %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), c.status, c.ctype, c.cache)
		}
		checkSecurityHeaders(t, c.method+" "+c.path, resp.Header)
		switch {
		case c.status == 200 && string(body) != c.body:
			t.Errorf("%s %s: body %q, want %q", c.method, c.path, body, c.body)
		case c.status != 200:
			var e struct {
				Error struct{ Code, Message string }
			}
			want := map[int]string{404: "not_found", 405: "method_not_allowed"}[c.status]
			if json.Unmarshal(body, &e) != nil || e.Error.Code != want || !strings.Contains(e.Error.Message, c.path) {
				t.Errorf("%s %s: error body %s, want code %s naming the path", c.method, c.path, body, want)
			}
		}
	}

	// Revalidation: the ETag of index.html (the same on every route that
	// answers it) gets a 304 without a body; another ETag the file.
	first := serve(t, u, "GET", "/")
	etag := first.Header.Get("ETag")
	if !regexp.MustCompile(`^"[A-Za-z0-9_-]{16}"$`).MatchString(etag) || serve(t, u, "GET", "/c/x").Header.Get("ETag") != etag {
		t.Fatalf("ETag of index.html %q", etag)
	}
	again := serve(t, u, "GET", "/c/other", "If-None-Match", etag)
	if body, _ := io.ReadAll(again.Body); again.StatusCode != 304 || len(body) != 0 {
		t.Errorf("revalidating index.html: %d with %d bytes, want 304 and none", again.StatusCode, len(body))
	}
	checkSecurityHeaders(t, "304", again.Header)
	if stale := serve(t, u, "GET", "/", "If-None-Match", `"old"`); stale.StatusCode != 200 {
		t.Errorf("a stale ETag: %d, want 200", stale.StatusCode)
	}
}

// TestPatterns: the UI names its routes for a ServeMux, never the API's
// paths, and a build without index.html is refused.
func TestPatterns(t *testing.T) {
	u, err := webui.New(build)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/{$}", "/c/{id}", "/tokens", "/assets/", "/favicon.svg", "/icons/", "/index.html"}
	if got := u.Patterns(); !slices.Equal(got, want) {
		t.Fatalf("patterns %q, want %q", got, want)
	}
	mux := http.NewServeMux() // they register without conflict beside the API's
	for _, p := range append(u.Patterns(), "/v1/conversations", "/healthz", "/readyz", "/metrics") {
		mux.Handle("GET "+p, http.NotFoundHandler())
	}
	if _, err := webui.New(fstest.MapFS{"assets/a-12345678.js": {Data: []byte("x")}}); err == nil {
		t.Fatal("a build without index.html was taken")
	}
}

// TestEmbeddedBuild: the build in the binary serves its index.html, and
// every file it names by an absolute path (its scripts, styles, icons) is
// served from the build with the caching its name calls for.
func TestEmbeddedBuild(t *testing.T) {
	u := webui.Embedded()
	resp := serve(t, u, "GET", "/")
	index, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(string(index)), "<!doctype html>") {
		t.Fatalf("embedded index.html: %d %.200s", resp.StatusCode, index)
	}
	refs := regexp.MustCompile(`(?:src|href)="(/[^"]+)"`).FindAllStringSubmatch(string(index), -1)
	assets := 0
	for _, m := range refs {
		resp := serve(t, u, "GET", m[1])
		if resp.StatusCode != 200 {
			t.Errorf("index.html names %s: %d", m[1], resp.StatusCode)
		}
		if strings.HasPrefix(m[1], "/assets/") {
			assets++
			if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
				t.Errorf("%s: Cache-Control %q, want immutable", m[1], cc)
			}
		}
	}
	if assets == 0 {
		t.Fatalf("the embedded index.html names no file under /assets/: %s", index)
	}
}

func checkSecurityHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": webui.ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s: %s %q, want %q", what, k, h.Get(k), v)
		}
	}
	csp := h.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d+";") && !strings.HasSuffix(csp, d) {
			t.Errorf("%s: the policy %q lacks %q", what, csp, d)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "*") || strings.Contains(csp, "data:") {
		t.Errorf("%s: the policy %q allows more than the server's own origin", what, csp)
	}
}
