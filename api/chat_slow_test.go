package api_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
	dto "github.com/prometheus/client_model/go"
)

// TestSlowChatClientLosesNothing: a chat client that reads slower than
// the answer is written has its subscription dropped (its queue holds 4
// events here), and the stream takes it up again from the last event it
// read: the client still gets every delta once, in order.
func TestSlowChatClientLosesNothing(t *testing.T) {
	t.Parallel()
	metrics := engine.NewMetrics(nil)
	b := setup(t, engine.Options{SubscriberBuffer: 4, Metrics: metrics}, api.Options{})
	id := b.conversation("alice")
	// A client with a small receive buffer, which reads nothing until the answer is written.
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}).DialContext}}
	body, _ := json.Marshal(chatBody(id, "u1", "Say a lot"))
	req, _ := http.NewRequestWithContext(b.ctx, "POST", b.url+"/v1/chat", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+b.bob)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	var want strings.Builder
	for i := range 60 {
		delta := strings.Repeat(string(rune('a'+i%26)), 8<<10)
		want.WriteString(delta)
		do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"`+delta+`"}`)
	}
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)

	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	last := ""
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = line
		var c struct{ Type, Delta string }
		if json.Unmarshal([]byte(line), &c) == nil && c.Type == "text-delta" {
			got.WriteString(c.Delta)
		}
	}
	if last != "[DONE]" || got.String() != want.String() {
		t.Fatalf("the slow client got %d bytes of %d (last chunk %.80q)", got.Len(), want.Len(), last)
	}
	var m dto.Metric
	if err := metrics.SlowDisconnects.Write(&m); err != nil || m.GetCounter().GetValue() == 0 {
		t.Fatal("the client was never too slow: the test shows nothing")
	}
}
