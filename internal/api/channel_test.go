package api_test

import (
	"context"
	"encoding/json"
	"github.com/coder/websocket"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/deliveries"
	"github.com/parleyhq/parley/internal/engine"
)

// TestRepliesGoOnlyToTheirPromptsChannel: the operator's channel webhook
// posts a reply only to the channel its prompt came from. A runner cannot
// name another channel (nor one for an answer to a prompt that came from
// none), a member cannot say its prompt or message came from a channel
// (an admin, the channel's bridge, may), and the webhook's idempotency key
// is the server's, not an id a client chose. Rows of docs/security.md.
func TestRepliesGoOnlyToTheirPromptsChannel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posted []string // "channel id|idempotency key|message id"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			MessageID string         `json:"messageId"`
			Channel   parley.Channel `json:"channel"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		posted = append(posted, body.Channel.ID+"|"+r.Header.Get("Idempotency-Key")+"|"+body.MessageID)
		mu.Unlock()
	}))
	defer hook.Close()
	b, id, run := slackConversation(t, hook.URL)
	base := "/v1/conversations/" + id

	// Members may not say where a prompt or message came from.
	before := b.snapshot()
	slack := map[string]any{"type": "slack", "id": "C99"}
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"content": "x", "channel": slack}), 403, parley.EFORBIDDEN)
	b.want(b.do("POST", base+"/messages", b.alice, map[string]any{"content": "x", "channel": slack}), 403, parley.EFORBIDDEN)
	if b.snapshot() != before {
		t.Fatal("a refused request wrote something")
	}

	// A prompt from no channel: its answer may not name one.
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "hi"}), 201, "")
	until(t, b, run, "prompt")
	f := send(t, b, run, `{"type":"message.create","turnId":"r1","channelType":"slack","channelId":"C99"}`)
	if e, _ := f["error"].(map[string]any); f["type"] != "error" || e["code"] != parley.EFORBIDDEN {
		t.Fatalf("an answer naming a channel of its own: %v", f)
	}
	answer(t, b, run, "r1", "no channel")

	// A prompt from slack C42 (posted by the bridge, an admin): its answer
	// goes to C42, which the runner may repeat but not change.
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p2", "content": "hi from slack",
		"channel": map[string]any{"type": "slack", "id": "C42"}}), 201, "")
	until(t, b, run, "prompt")
	f = send(t, b, run, `{"type":"message.create","turnId":"r2","channelType":"slack","channelId":"C99"}`)
	if e, _ := f["error"].(map[string]any); f["type"] != "error" || e["code"] != parley.EFORBIDDEN {
		t.Fatalf("an answer naming another channel: %v", f)
	}
	do(t, b, run, `{"type":"message.create","turnId":"r2","channelType":"slack","channelId":"C42"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r2","delta":"to slack"}`)
	do(t, b, run, `{"type":"message.finalize","turnId":"r2","reason":"end_turn"}`)
	do(t, b, run, `{"type":"complete"}`)

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(posted)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) == 0 {
		t.Fatal("the reply never reached the webhook")
	}
	// The first post is r2's: a reply that went to a channel of its
	// runner's choosing (r1's, to C99) would have been due before it.
	parts := strings.Split(posted[0], "|")
	if parts[0] != "C42" || parts[2] != "r2" || !strings.HasPrefix(parts[1], "dl_") {
		t.Fatalf("the webhook got %q: want channel C42, message r2, a key of the server's", posted[0])
	}
}

// slackConversation serves a test's API whose channel replies of type
// slack are posted to hook, with a conversation of alice's and alice's
// runner attached to it.
func slackConversation(t *testing.T, hook string) (*bundle, string, *websocket.Conn) {
	b := setup(t, engine.Options{}, api.Options{})
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	go deliveries.New(b.db, deliveries.Options{Webhooks: map[string]string{"slack": hook}, Poll: 10 * time.Millisecond}).Deliver(ctx)
	id := b.conversation("alice")
	return b, id, b.runnerConn(id, b.alice)
}
