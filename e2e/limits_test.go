package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSlowClientsAreCutOff: parley serve closes a connection that sends no
// request, or its headers too slowly, within -header-timeout; one that
// trickles a body within -body-timeout; and refuses headers over 64 KiB
// with 431.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	admin, _ := createToken(t, db, "-kind", "admin")
	srv := startServer(t, db, "-header-timeout", "1s", "-body-timeout", "1s")
	addr := strings.TrimPrefix(srv.url, "http://")
	const bound = 3 * time.Second // each timeout is 1 s

	// closedWithin sends what, then waits for the server to close the
	// connection (after an answer, if it gives one) for at most bound.
	closedWithin := func(name, what string, trickle bool) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, what); err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_, _ = io.Copy(io.Discard, c)
		}()
		start := time.Now()
		for {
			select {
			case <-closed:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if time.Since(start) > bound {
				t.Fatalf("%s: the connection is still open after %s", name, bound)
			}
			if trickle {
				_, _ = c.Write([]byte("x"))
			}
		}
	}
	closedWithin("nothing sent", "", false)
	closedWithin("half the headers", "POST /v1/conversations HTTP/1.1\r\nHost: "+addr+"\r\n", false)
	closedWithin("headers a byte at a time", "POST /v1/conversations HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: ", true)
	closedWithin("a trickled body", "POST /v1/conversations HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+admin+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", true)

	req, _ := http.NewRequest("GET", srv.url+"/v1/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _ = req.Write(c) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d, want 431", resp.StatusCode)
	}
}
