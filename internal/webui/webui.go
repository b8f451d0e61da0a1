// Package webui serves Parley's web UI: the single-page application that
// web/ui builds into webui/dist, embedded in the binary so that the server
// needs no other file (and go install no Node).
//
// The UI answers the GET (and HEAD) patterns of Patterns: "/", a
// conversation's own page "/c/{id}" and the tokens' page "/tokens" answer
// index.html, and the application
// reads the URL to decide what to show; "/assets/…" and the other files of
// the build are served as they are. Every answer carries the headers of
// SetHeaders: a Content-Security-Policy that allows only same-origin
// scripts, styles, images, fonts and connections and no framing,
// X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

//go:embed all:dist
var dist embed.FS

// ContentSecurityPolicy is the policy of every answer of the UI: scripts,
// styles, images, fonts, the manifest and connections (fetch, EventSource,
// WebSocket) from the server's own origin only; no plugins, no <base>, and
// no page of another origin may frame it.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Cache-Control values: index.html and unhashed files are revalidated on
// every use (their ETag makes that a 304); a file whose name carries its
// content's hash never changes, so it is kept for a year without asking.
const (
	cacheRevalidate = "no-cache"
	cacheImmutable  = "public, max-age=31536000, immutable"
)

// hashed matches a file name as Vite writes it under assets/: a name, a
// dash, the content's 8-character hash (base64url), an extension.
var hashed = regexp.MustCompile(`^[^/]+-[A-Za-z0-9_-]{8}\.[A-Za-z0-9]+$`)

// reserved are top-level names the API answers itself: a file or folder of
// the build with one of these names is not served (the API's routes win).
var reserved = map[string]bool{"v1": true, "healthz": true, "readyz": true, "metrics": true, "c": true}

// contentTypes are the types of the files a build holds, fixed here rather
// than read from the machine's MIME tables, so that every machine answers
// the same. Anything else is application/octet-stream (with nosniff, a
// browser never runs it).
var contentTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".gif":         "image/gif",
	".webp":        "image/webp",
	".avif":        "image/avif",
	".ico":         "image/x-icon",
	".woff2":       "font/woff2",
	".woff":        "font/woff",
	".ttf":         "font/ttf",
	".txt":         "text/plain; charset=utf-8",
	".wasm":        "application/wasm",
}

// file is one file of the build, read once.
type file struct {
	name  string // its path in the build, for ServeContent
	data  []byte
	etag  string
	ctype string
	cache string
}

// UI serves one build of the web UI. It is safe for concurrent use.
type UI struct {
	files    map[string]*file // by URL path
	index    *file
	patterns []string
}

// Embedded returns the UI built into this binary (webui/dist), read once.
// It panics if that build has no index.html, which the package's tests
// rule out.
func Embedded() *UI { return embedded() }

var embedded = sync.OnceValue(func() *UI {
	sub, err := fs.Sub(dist, "dist")
	if err == nil {
		var u *UI
		if u, err = New(sub); err == nil {
			return u
		}
	}
	panic("webui: the embedded build is broken: " + err.Error())
})

// New reads a build (a folder holding index.html, assets/ and any other
// files) into memory and returns the UI that serves it.
func New(build fs.FS) (*UI, error) {
	u := &UI{files: map[string]*file{}}
	err := fs.WalkDir(build, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		top, _, _ := strings.Cut(p, "/")
		if reserved[top] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(build, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		f := &file{name: p, data: data, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`, ctype: contentType(p), cache: cacheRevalidate}
		if strings.HasPrefix(p, "assets/") && hashed.MatchString(path.Base(p)) {
			f.cache = cacheImmutable
		}
		u.files["/"+p] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the UI's build: %w", err)
	}
	if u.index = u.files["/index.html"]; u.index == nil {
		return nil, fmt.Errorf("the UI's build has no index.html")
	}
	u.patterns = []string{"/{$}", "/c/{id}", "/tokens", "/assets/"}
	entries, err := fs.ReadDir(build, ".") // sorted by name
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		switch {
		case reserved[e.Name()] || e.Name() == "assets":
		case e.IsDir():
			u.patterns = append(u.patterns, "/"+e.Name()+"/")
		default:
			u.patterns = append(u.patterns, "/"+e.Name())
		}
	}
	return u, nil
}

// Patterns are the paths the UI answers, in net/http.ServeMux syntax
// without a method (mount them for GET, which takes HEAD too): "/{$}",
// "/c/{id}" and "/tokens" (index.html), "/assets/", and each other file or folder at the
// top of the build ("/favicon.svg", "/index.html"). None of them is /v1/,
// /healthz, /readyz or /metrics.
func (u *UI) Patterns() []string { return append([]string(nil), u.patterns...) }

// ServeHTTP answers GET and HEAD: index.html for "/", "/c/{id}" and
// "/tokens", a file
// of the build for its path, and a JSON 404 for anything else.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SetHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	f := u.lookup(r.URL.Path)
	if f == nil {
		writeError(w, http.StatusNotFound, "not_found", "no such file: "+r.URL.Path)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", f.cache)
	h.Set("ETag", f.etag)
	// ServeContent answers If-None-Match (304), ranges and HEAD.
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.data))
}

// lookup finds what a path serves: index.html for the application's own
// routes, else the file of that path; nil if none.
func (u *UI) lookup(p string) *file {
	if p == "/" || p == "/tokens" {
		return u.index
	}
	if id, ok := strings.CutPrefix(p, "/c/"); ok {
		if id == "" || strings.Contains(id, "/") {
			return nil
		}
		return u.index
	}
	return u.files[p]
}

// SetHeaders sets the security headers every answer on the UI's routes
// carries, errors included: the Content-Security-Policy, nosniff, no
// referrer, and no framing (X-Frame-Options for browsers that predate
// frame-ancestors).
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// Secure returns next with the headers of SetHeaders on every answer: for
// what answers on the UI's routes besides the UI itself (a refusal).
func Secure(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		SetHeaders(w.Header())
		next(w, r)
	}
}

// writeError answers as the API does: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// contentType is the Content-Type of a file, by its extension.
func contentType(name string) string {
	if t, ok := contentTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}
