package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestChannelHearsEveryEnd: a channel's auto-reply is posted however its
// answer ends (complete, error, or canceled by a stop), with the answer's
// status in the payload, so that the channel always hears back.
func TestChannelHearsEveryEnd(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string]map[string]any{} // by message id
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		if id, ok := body["messageId"].(string); ok {
			got[id] = body
		}
		mu.Unlock()
	}))
	defer hook.Close()
	b, id, run := slackConversation(t, hook.URL)
	base := "/v1/conversations/" + id
	ask := func(pid string) {
		b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": pid, "content": "from slack",
			"channel": map[string]any{"type": "slack", "id": "C42"}}), 201, "")
		until(t, b, run, "prompt")
	}

	ask("p1")
	answer(t, b, run, "r1", "done")

	ask("p2")
	do(t, b, run, `{"type":"message.create","turnId":"r2"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r2","delta":"half"}`)
	do(t, b, run, `{"type":"error","turnId":"r2","error":"the model failed"}`)
	do(t, b, run, `{"type":"complete"}`)

	ask("p3")
	do(t, b, run, `{"type":"message.create","turnId":"r3"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r3","delta":"going on"}`)
	b.want(b.do("POST", base+"/abort", b.admin, nil), 202, "")
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted","turnId":"r3"}`)

	want := map[string]string{"r1": "complete", "r2": "error", "r3": "canceled"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for msg, status := range want {
		body, ok := got[msg]
		if !ok {
			t.Errorf("the channel never heard of %s (it ended %s)", msg, status)
			continue
		}
		if body["status"] != status {
			t.Errorf("%s was posted with status %v, want %s: %v", msg, body["status"], status, body)
		}
	}
}
