package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// BenchmarkChatReplay measures what a resume costs: one op of chat is the
// whole UI message stream of an answer of 2,000 text deltas (and a tool
// call every 200), read from the log from the question on, as a question
// posted again (or GET /v1/chat/{id}/stream mid-answer) reads it, through
// the client's end; one op of log is the same events as the
// conversation's own SSE stream sends them, for scale. deltas/s is the
// rate; B/delta what a delta costs on the wire.
//
//	go test ./api -run '^$' -bench ChatReplay -benchtime 3s
func BenchmarkChatReplay(b *testing.B) {
	const deltas = 2000
	bb := setup(b, engine.Options{}, api.Options{})
	ctx, cancel := context.WithCancel(context.Background()) // not the bundle's 30 s: -benchtime may ask for more
	b.Cleanup(cancel)
	bb.ctx = ctx
	id := bb.conversation("alice")
	first := bb.postJSON("/v1/chat", bb.bob, chatBody(id, "u1", "Tell me everything"))
	run := bb.runnerConn(id, bb.alice)
	frame := func(f string) {
		if err := run.Write(bb.ctx, websocket.MessageText, []byte(f)); err != nil {
			b.Fatal(err)
		}
		for {
			if r := readFrame(b, bb.ctx, run); r["type"] == "ack" {
				return
			} else if r["type"] == "error" {
				b.Fatalf("%s: %v", f, r)
			}
		}
	}
	for {
		if r := readFrame(b, bb.ctx, run); r["type"] == "prompt" {
			break
		}
	}
	frame(`{"type":"message.create","turnId":"r1"}`)
	for i := range deltas {
		frame(`{"type":"message.part.text-delta","turnId":"r1","delta":"word ` + fmt.Sprint(i) + ` "}`)
		if i%200 == 199 {
			frame(fmt.Sprintf(`{"type":"message.part.tool-update","turnId":"r1","callId":"c%d","toolName":"search","status":"completed","args":{"i":%d},"result":"ok"}`, i, i))
		}
	}
	frame(`{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	frame(`{"type":"complete"}`)
	first.Body.Close()

	body, _ := json.Marshal(chatBody(id, "u1", "Tell me everything"))
	// chat is the replay; log, for scale, the same events as Parley's own
	// SSE stream sends them (GET …/stream?after=0, ended by the client
	// once it has the last).
	for _, kind := range []string{"chat", "log"} {
		b.Run(kind, func(b *testing.B) {
			var bytes int64
			for range b.N {
				var resp = bb.send("POST", "/v1/chat", bb.bob, body)
				if kind == "log" {
					resp = bb.send("GET", "/v1/conversations/"+id+"/stream?after=0", bb.bob, nil)
				}
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				n, last := 0, ""
				for sc.Scan() {
					bytes += int64(len(sc.Bytes()) + 1)
					line, ok := strings.CutPrefix(sc.Text(), "data: ")
					if !ok {
						continue
					}
					last = line
					if strings.Contains(line, `"text-delta"`) || strings.Contains(line, `"type":"chunk"`) {
						n++
					}
					if kind == "log" && strings.Contains(line, `"type":"prompt.completed"`) {
						last = "[DONE]"
						break
					}
				}
				resp.Body.Close()
				if n != deltas || last != "[DONE]" {
					b.Fatalf("%s: %d deltas, ending %.80q", kind, n, last)
				}
			}
			b.ReportMetric(float64(deltas)*float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
			b.ReportMetric(float64(bytes)/float64(deltas*b.N), "B/delta")
		})
	}
}
