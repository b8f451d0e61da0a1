package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/deliveries"
	"github.com/parleyhq/parley/internal/engine"
)

// TestChannelAutoReply: a prompt that came from a channel gets its reply
// posted to that channel's webhook once finalized, retried after a failure,
// with the delivery's id (not the message's, which a runner chose) as the
// idempotency key.
func TestChannelAutoReply(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	var keys []string
	calls := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if calls == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got = append(got, body)
	}))
	defer hook.Close()

	b := setup(t, engine.Options{}, api.Options{})
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go deliveries.New(b.db, deliveries.Options{Webhooks: map[string]string{"slack": hook.URL}, Poll: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}).Deliver(ctx)

	id := b.conversation()
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", "/v1/conversations/"+id+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "hi from slack",
		"channel": map[string]any{"type": "slack", "id": "C42"}}), 201, "")
	until(t, b, run, "prompt")
	answer(t, b, run, "r1", "hello slack")

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reply never reached the webhook")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	ch := got[0]["channel"].(map[string]any)
	if got[0]["messageId"] != "r1" || got[0]["content"] != "hello slack" || ch["id"] != "C42" || calls < 2 {
		t.Fatalf("webhook got %v after %d calls", got[0], calls)
	}
	// The key is the delivery's, the same on every attempt, and not the
	// message id, which the runner chose.
	if !strings.HasPrefix(keys[0], "dl_") || keys[1] != keys[0] {
		t.Fatalf("Idempotency-Key %q on the attempts", keys)
	}
	r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
	if r.body["channel"].(map[string]any)["id"] != "C42" || r.body["replyTo"] != "p1" {
		t.Fatalf("the reply = %s", r.raw)
	}
}
