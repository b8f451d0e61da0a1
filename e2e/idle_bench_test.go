package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// BenchmarkIdleSubscribers measures what an idle client costs the
// server: 2,000 WebSocket (then SSE) subscribers follow 100 quiet
// conversations, or 2,000 runners wait for prompts in them, and the real
// server's resident memory is read before they came and once they are
// all in. It reports the growth per client, in KiB.
//
//	go test -run '^$' -bench IdleSubscribers -benchtime=1x ./e2e
func BenchmarkIdleSubscribers(b *testing.B) {
	for _, transport := range []string{"ws", "sse", "runner"} {
		b.Run(transport, func(b *testing.B) {
			for range b.N {
				idleSubscribers(b, transport, 2000)
			}
		})
	}
}

func idleSubscribers(b *testing.B, transport string, n int) {
	srv := startServer(b, filepath.Join(b.TempDir(), "parley.db"), "-create-rate", "0", "-max-token-connections", "0", "-runner-connect-rate", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(srv.url, "")
	var ids []string
	for range 100 {
		v, err := c.CreateConversation(ctx, client.NewConversation{Title: "quiet", TurnPolicy: parley.PolicyFree, Participants: []string{"alice"}})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, v.Conversation.ID)
		if _, err := c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "alice", Content: "hello"}); err != nil {
			b.Fatal(err)
		}
	}
	pid := srv.cmd.Process.Pid
	time.Sleep(time.Second)
	before := rss(b, pid, "VmRSS")
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for i := range n {
		id := ids[i%len(ids)]
		switch transport {
		case "ws":
			conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.url, "http")+"/v1/conversations/"+id+"/ws", nil)
			if err != nil {
				b.Fatal(err)
			}
			conn.SetReadLimit(1 << 20)
			if _, _, err := conn.Read(ctx); err != nil { // init
				b.Fatal(err)
			}
			closers = append(closers, func() { conn.CloseNow() })
		case "runner":
			conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.url, "http")+"/v1/conversations/"+id+"/runner?agentId=alice", nil)
			if err != nil {
				b.Fatal(err)
			}
			closers = append(closers, func() { conn.CloseNow() })
		case "sse":
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.url+"/v1/conversations/"+id+"/stream", nil)
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 512)
			if _, err := resp.Body.Read(buf); err != nil { // init
				b.Fatal(err)
			}
			closers = append(closers, func() { resp.Body.Close() })
		}
	}
	time.Sleep(3 * time.Second) // garbage collected, stacks shrunk
	after := rss(b, pid, "VmRSS")
	b.ReportMetric(float64(after-before)/float64(n)/1024, "KiB/subscriber")
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
}
