package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// BenchmarkUnreadStreams measures the server's memory while 950 streams
// that never read (the most one token may hold, less a few) follow a
// conversation whose snapshot is as large as a snapshot gets: 40
// messages of 60 KB of text (about 120 KB each in JSON, where the text is
// both the parts and the content), an init frame of about 4.3 MB. Half
// join over SSE and half over WebSocket, on raw sockets that read
// nothing, not even the answer's headers. While they are there, 20 more
// messages of 360 KB are written. It reports the real server's resident
// memory before the streams came, its peak while they were there, what
// it holds once the writes are done, the server's own count of the bytes
// it holds for subscribers (parley_subscriber_bytes) at its highest, and
// how many streams are still open at the end; with the default
// -subscriber-memory (256 MiB) and with 64 MiB.
//
//	go test -run '^$' -bench UnreadStreams -benchtime=1x ./e2e
func BenchmarkUnreadStreams(b *testing.B) {
	for _, budget := range []string{"default", "64MiB"} {
		b.Run("memory="+budget, func(b *testing.B) {
			var args []string
			if budget == "64MiB" {
				args = []string{"-subscriber-memory", fmt.Sprint(64 << 20)}
			}
			for range b.N {
				unreadStreams(b, 950, args...)
			}
		})
	}
}

func unreadStreams(b *testing.B, streams int, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, c, id := largeConversation(b, ctx, args...)
	text := strings.Repeat("0123456789", 6_000)
	for range 40 {
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: text}); err != nil {
			b.Fatal(err)
		}
	}
	pid := srv.cmd.Process.Pid
	time.Sleep(2 * time.Second) // let the writes' garbage go
	before := rss(b, pid, "VmRSS")

	var peakHeld atomic.Int64
	peak := sampleRSS(b, pid, 50*time.Millisecond, func() {
		if held, ok := metric(srv.url, "parley_subscriber_bytes"); ok {
			peakHeld.Store(max(peakHeld.Load(), int64(held)))
		}
	})
	conns := make([]net.Conn, 0, streams)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for i := range streams {
		conn, err := dialUnread(srv.url, id, i%2 == 1)
		if err != nil {
			b.Fatalf("stream %d: %v", i, err)
		}
		conns = append(conns, conn)
	}
	for range 20 {
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: strings.Repeat(text, 6)}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	held := rss(b, pid, "VmRSS")
	open, _ := metric(srv.url, "parley_subscribers")
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
	b.ReportMetric(float64(peak())/(1<<20), "MiB-peak")
	b.ReportMetric(float64(held)/(1<<20), "MiB-held")
	b.ReportMetric(float64(peakHeld.Load())/(1<<20), "MiB-counted")
	b.ReportMetric(open, "streams-open")
}

// dialUnread opens a stream of a conversation on a raw socket, over SSE or
// WebSocket, and sends its request; it reads nothing, ever.
func dialUnread(base, id string, ws bool) (net.Conn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	req := "GET /v1/conversations/" + id + "/stream HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n"
	if ws {
		req = "GET /v1/conversations/" + id + "/ws HTTP/1.1\r\nHost: " + u.Host +
			"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	}
	if _, err := fmt.Fprint(conn, req); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// metric reads a gauge or a counter of the server's /metrics.
func metric(base, name string) (float64, bool) {
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return 0, false
	}
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) != 1 {
		return 0, false
	}
	if c := f.GetMetric()[0].GetCounter(); c != nil {
		return c.GetValue(), true
	}
	return f.GetMetric()[0].GetGauge().GetValue(), true
}
