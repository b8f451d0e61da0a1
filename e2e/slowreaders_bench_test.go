package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// BenchmarkSlowReaders measures the server's memory while 20 slow readers
// follow a conversation of 100 large messages (520 KB of text each: 32 of
// them still streaming, the most there may be at once, and 68 finished):
// 5 join over SSE with no position and read nothing, 5 join with after=0
// (the whole log) and read nothing, 5 join over WebSocket with no position
// and read nothing, and 5 join with after=0 and read 16 KiB every 100 ms.
// While they do, 40 more messages of 400 KB are written, one every 200 ms,
// and two SDK followers (as parley tail) read everything. It reports the
// real server's resident memory before the readers came and its peak
// while they were there, and how often the followers had to reconnect.
//
//	go test -run '^$' -bench SlowReaders -benchtime=1x ./e2e
func BenchmarkSlowReaders(b *testing.B) {
	for range b.N {
		slowReaders(b)
	}
}

func slowReaders(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, c, id := largeConversation(b, ctx)
	run, err := c.ConnectRunner(ctx, id, "alice")
	if err != nil {
		b.Fatal(err)
	}
	defer run.Close()
	text := strings.Repeat("0123456789", 52_000)
	for i := range 32 {
		mid := fmt.Sprintf("s%02d", i)
		if _, err := run.Create(ctx, mid); err != nil {
			b.Fatal(err)
		}
		if _, err := run.Text(ctx, mid, text); err != nil {
			b.Fatal(err)
		}
	}
	for range 68 {
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: text}); err != nil {
			b.Fatal(err)
		}
	}
	pid := srv.cmd.Process.Pid
	time.Sleep(2 * time.Second) // let the writes' garbage go
	before := rss(b, pid, "VmRSS")

	peak := sampleRSS(b, pid, 20*time.Millisecond, nil)

	rctx, rcancel := context.WithCancel(ctx)
	var readers sync.WaitGroup
	sse := func(query string, slow bool) {
		defer readers.Done()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.url+"/v1/conversations/"+id+"/stream"+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		if !slow {
			<-rctx.Done()
			return
		}
		buf := make([]byte, 16<<10)
		for {
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				return
			}
			select {
			case <-rctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for i := range 20 {
		readers.Add(1)
		switch i / 5 {
		case 0:
			go sse("", false)
		case 1:
			go sse("?after=0", false)
		case 2:
			go func() {
				defer readers.Done()
				conn, _, err := websocket.Dial(rctx, "ws"+strings.TrimPrefix(srv.url, "http")+"/v1/conversations/"+id+"/ws", nil)
				if err == nil {
					<-rctx.Done()
					conn.CloseNow()
				}
			}()
		default:
			go sse("?after=0", true)
		}
	}
	var reconnects atomic.Int64
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			st := c.Subscribe(rctx, id, client.SubscribeOptions{OnReconnect: func(error) { reconnects.Add(1) }})
			defer st.Close()
			for {
				if _, err := st.Next(rctx); err != nil {
					return
				}
			}
		}()
	}
	for range 40 {
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: text[:400_000]}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(15 * time.Second) // past the write timeout that drops readers that read nothing
	rcancel()
	readers.Wait()
	top := peak()
	hwm := rss(b, pid, "VmHWM")
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
	b.ReportMetric(float64(top)/(1<<20), "MiB-peak")
	b.ReportMetric(float64(hwm)/(1<<20), "MiB-hwm")
	b.ReportMetric(float64(reconnects.Load()), "reconnects")
}

// largeConversation starts parley serve with args and makes a conversation
// of free turns in it (alice writes it), for the benchmarks of what large
// messages cost.
func largeConversation(b *testing.B, ctx context.Context, args ...string) (*server, *client.Client, string) {
	srv := startServer(b, filepath.Join(b.TempDir(), "parley.db"), args...)
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "large", TurnPolicy: parley.PolicyFree})
	if err != nil {
		b.Fatal(err)
	}
	return srv, c, v.Conversation.ID
}

// sampleRSS samples the resident memory of process pid every interval,
// calling each (if not nil) at each sample too, until the function it
// returns is called; that returns the highest it saw.
func sampleRSS(b *testing.B, pid int, every time.Duration, each func()) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		for {
			peak.Store(max(peak.Load(), rss(b, pid, "VmRSS")))
			if each != nil {
				each()
			}
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() int64 {
		close(done)
		sampled.Wait()
		return peak.Load()
	}
}

// rss reads a memory figure (VmRSS, VmHWM) of a process from /proc, in bytes.
func rss(b testing.TB, pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
