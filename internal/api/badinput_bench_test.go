package api_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// BenchmarkWritesDuringBadInput measures what a flood of bad input costs
// the others: one agent's message writes over HTTP (one op), alone and
// while two clients send bad requests and bad runner frames as fast as
// they are refused and two subscribers (WebSocket and SSE) never read.
// bad/s is the rate at which the flood was refused.
//
//	go test ./api -run '^$' -bench WritesDuringBadInput -benchtime 3s
func BenchmarkWritesDuringBadInput(b *testing.B) {
	for _, flood := range []bool{false, true} {
		name := "quiet"
		if flood {
			name = "flood"
		}
		b.Run(name, func(b *testing.B) {
			bb := setup(b, engine.Options{}, api.Options{MaxBodyBytes: 64 << 10})
			id := bb.conversation()
			var bad atomic.Int64
			stop := make(chan struct{})
			var floods []<-chan error
			if flood {
				for range 2 {
					floods = append(floods, bb.flood(id, bb.runnerConn(id, bb.bob), stop, &bad))
				}
				bb.dialWS(id, "?after=0") // never read
				req, _ := http.NewRequestWithContext(bb.ctx, "GET", bb.url+"/v1/conversations/"+id+"/stream?after=0", nil)
				req.Header.Set("Authorization", "Bearer "+bb.viewer)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close() // never read
			}
			body := `{"content":"` + strings.Repeat("w", 200) + `"}`
			b.ResetTimer()
			for b.Loop() {
				bb.want(bb.do("POST", "/v1/conversations/"+id+"/messages", bb.alice, body), 201, "")
			}
			b.StopTimer()
			close(stop)
			for _, f := range floods {
				if err := <-f; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(bad.Load())/b.Elapsed().Seconds(), "bad/s")
		})
	}
}

// BenchmarkRevertedFrame measures the largest reverted frame a runner may
// send (engine.MaxRevertIDs ids that name nothing; one op is one frame and
// its answer), which holds its conversation while the ids are looked up.
//
//	go test ./api -run '^$' -bench RevertedFrame
func BenchmarkRevertedFrame(b *testing.B) {
	bb := setup(b, engine.Options{}, api.Options{})
	id := bb.conversation()
	bb.post(id, bb.alice, "kept", "none")
	c := bb.runnerConn(id, bb.alice)
	frame := []byte(`{"type":"reverted","messageIds":["` + strings.Join(manyIDs(engine.MaxRevertIDs), `","`) + `"]}`)
	for b.Loop() {
		if err := c.Write(bb.ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		// Ids that name nothing: not_found, once every one was looked up.
		if e := readFrame(b, bb.ctx, c); e["type"] != "error" || e["error"].(map[string]any)["code"] != "not_found" {
			b.Fatalf("answered %v", e)
		}
	}
}
