package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// BenchmarkThreadOfLargeChain measures the thread view of a chain of 100
// messages of about 1 MB each (500 KB of text and a tool call of 470 KB),
// each a reply to the one before: one op is GET …/thread of the last (99
// ancestors). It reports the answer's size, the real server's resident
// memory before, its peak while 10 and then 20 such views are asked at
// once, and how long those took.
//
//	go test -run '^$' -bench ThreadOfLargeChain -benchtime=10x ./e2e
func BenchmarkThreadOfLargeChain(b *testing.B) {
	srv := startServer(b, filepath.Join(b.TempDir(), "parley.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id, ids := largeChain(b, ctx, srv.url, 100)
	thread := srv.url + "/v1/conversations/" + id + "/messages/" + ids[len(ids)-1] + "/thread"
	get := func() (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, thread, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return int(n), err
	}
	pid := srv.cmd.Process.Pid
	time.Sleep(time.Second) // let the writes' garbage go
	before := rss(b, pid, "VmRSS")
	var size int
	b.ResetTimer()
	for range b.N {
		n, err := get()
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	b.StopTimer()
	b.ReportMetric(float64(size)/(1<<10), "KiB/answer")
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
	for _, at := range []int{10, 20} {
		peak, took := peakDuring(b, pid, func() {
			var wg sync.WaitGroup
			for range at {
				wg.Go(func() {
					if _, err := get(); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		})
		b.ReportMetric(float64(peak)/(1<<20), fmt.Sprintf("MiB-peak%d", at))
		b.ReportMetric(took.Seconds(), fmt.Sprintf("s-%dat-once", at))
	}
}

// largeChain makes a conversation of n messages of about 1 MB, each a
// reply to the one before, and returns its id and the messages' ids.
func largeChain(b *testing.B, ctx context.Context, url string, n int) (string, []string) {
	c := client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "chain", TurnPolicy: parley.PolicyFree})
	if err != nil {
		b.Fatal(err)
	}
	id := v.Conversation.ID
	text := strings.Repeat("0123456789", 50_000)
	args, _ := json.Marshal(map[string]string{"x": strings.Repeat("a", 470_000)})
	var ids []string
	for i := range n {
		mid := fmt.Sprintf("m%03d", i)
		parts := []parley.Part{{Type: parley.PartText, Text: text},
			{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: "completed", Args: args}}
		reply := ""
		if i > 0 {
			reply = ids[i-1]
		}
		if _, err := c.PostMessage(ctx, id, client.Message{ID: mid, AgentID: "alice", Parts: parts, ReplyTo: reply}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, mid)
	}
	return id, ids
}

// peakDuring runs fn while it samples the resident memory of process pid,
// and returns the peak and how long fn took.
func peakDuring(b *testing.B, pid int, fn func()) (int64, time.Duration) {
	peak := sampleRSS(b, pid, 10*time.Millisecond, nil)
	start := time.Now()
	fn()
	took := time.Since(start)
	return peak(), took
}

// BenchmarkExportDuringWrites measures what exports of a conversation of
// 100k messages cost its writers: one op posts a message to it while 0, 1
// or 6 exports of it (JSON Lines, read as fast as they come) run, again
// and again. It reports the posts' median and slowest answer, and how
// long an export took.
//
//	go test -run '^$' -bench ExportDuringWrites -benchtime=200x ./e2e
func BenchmarkExportDuringWrites(b *testing.B) {
	srv := startServer(b, filepath.Join(b.TempDir(), "parley.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := client.New(srv.url, "")
	const id = "big"
	if _, err := c.Import(ctx, bytes.NewReader(manyMessages(b, 100_000)), client.ImportOptions{ID: id}); err != nil {
		b.Fatal(err)
	}
	for _, exports := range []int{0, 1, 6} {
		b.Run(fmt.Sprintf("exports=%d", exports), func(b *testing.B) {
			ectx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			var took sync.Map
			var done atomic.Int64
			for i := range exports {
				wg.Go(func() {
					for ectx.Err() == nil {
						start := time.Now()
						if _, err := c.Export(ectx, id, "jsonl", io.Discard); err != nil {
							return
						}
						took.Store(fmt.Sprint(i, done.Add(1)), time.Since(start))
					}
				})
			}
			if exports > 0 {
				time.Sleep(500 * time.Millisecond) // the exports are under way
			}
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: "write while exporting"}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			stop()
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
			var sum time.Duration
			n := 0
			took.Range(func(_, v any) bool { sum += v.(time.Duration); n++; return true })
			if n > 0 {
				b.ReportMetric((sum / time.Duration(n)).Seconds(), "s/export")
			}
		})
	}
}

// manyMessages returns a JSON Lines export of conversation "big" with n
// messages of agent a after its conversation.created event.
func manyMessages(b *testing.B, n int) []byte {
	created := `{"event":{"conversationId":"big","seq":1,"type":"conversation.created","turn":0,"agentId":"admin","finality":"none","ts":"2026-01-02T03:04:05.000Z","data":{"id":"big","epoch":"e1","title":"big","participants":["a","b"],"turnPolicy":"free","messageFormat":"v2","createdBy":"admin","createdAt":"2026-01-02T03:04:05.000Z"}}}`
	msg := func(i int) string {
		return fmt.Sprintf(`{"id":"m%d","conversationId":"big","seq":%d,"role":"assistant","agentId":"a","parts":[{"type":"text","text":"message number %d of the big one"}],"content":"message number %d of the big one","status":"complete","turn":1,"turnId":"m0","depth":0,"finality":"none","createdAt":"2026-01-02T03:04:06.000Z","updatedAt":"2026-01-02T03:04:06.000Z"}`, i, i+2, i, i)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"parley":"export","version":1,"conversation":{"id":"big","epoch":"e1","title":"big","participants":["a","b"],"turnPolicy":"free","messageFormat":"v2","createdBy":"admin","createdAt":"2026-01-02T03:04:05.000Z"},"lastSeq":%d}`+"\n", n+1)
	buf.WriteString(created + "\n")
	for i := range n {
		fmt.Fprintf(&buf, `{"event":{"conversationId":"big","seq":%d,"type":"message","turn":1,"turnId":"m0","agentId":"a","finality":"none","ts":"2026-01-02T03:04:06.000Z","data":%s}}`+"\n", i+2, msg(i))
	}
	for i := range n {
		fmt.Fprintf(&buf, `{"message":%s}`+"\n", msg(i))
	}
	return buf.Bytes()
}
