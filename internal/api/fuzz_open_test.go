package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

// FuzzOpenRequest feeds the open-mode checks arbitrary Host, Origin,
// Sec-Fetch-Site and Content-Type headers, with and without a body. They
// must never panic; a refusal is 403 forbidden or 415
// unsupported_media_type; and what they accept is addressed to a loopback
// name, comes from no origin or the Host's own, is not marked cross-site
// or same-site, and has no body or a JSON one.
func FuzzOpenRequest(f *testing.F) {
	f.Add("127.0.0.1:7700", "", "", "application/json", true)
	f.Add("localhost:7700", "http://localhost:7700", "same-origin", "application/json; charset=utf-8", true)
	f.Add("[::1]:7700", "http://[::1]:7700", "", "", false)
	f.Add("evil.example:7700", "http://evil.example:7700", "", "application/json", true)
	f.Add("127.0.0.1:7700", "http://evil.example", "cross-site", "text/plain", true)
	f.Add("127.0.0.1:7700", "null", "", "application/x-www-form-urlencoded", true)
	f.Add("LOCALHOST", "", "none", "APPLICATION/JSON", true)
	f.Add("[::1", "http://[::1", "", "application/json;", true)
	s := &Server{}
	f.Fuzz(func(t *testing.T, host, origin, site, contentType string, body bool) {
		r := &http.Request{Host: host, Header: http.Header{}}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		if body {
			r.ContentLength = -1
		}
		err := s.checkOpen(r)
		if err != nil {
			if c := parley.ErrorCode(err); c != parley.EFORBIDDEN && c != parley.EMEDIATYPE {
				t.Fatalf("refused with code %q: %v", c, err)
			}
			return
		}
		name := host
		if h, _, err := net.SplitHostPort(host); err == nil {
			name = "[" + h + "]"
		} else {
			name = "[" + strings.Trim(name, "[]") + "]"
		}
		switch strings.ToLower(name) {
		case "[localhost]", "[127.0.0.1]", "[::1]":
		default:
			t.Fatalf("accepted Host %q", host)
		}
		if origin != "" {
			u, err := url.Parse(origin)
			if err != nil || !strings.EqualFold(u.Host, host) {
				t.Fatalf("accepted Origin %q for Host %q", origin, host)
			}
		}
		if site == "cross-site" || site == "same-site" {
			t.Fatalf("accepted Sec-Fetch-Site %q", site)
		}
		if mt, _, err := mime.ParseMediaType(contentType); body && (err != nil || mt != "application/json") {
			t.Fatalf("accepted a body of type %q", contentType)
		}
	})
}
