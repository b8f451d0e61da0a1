package api_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/prometheus/client_golang/prometheus"
)

// logBuffer is a slog destination the tests can read while the server writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestQueryTokenIsAcceptedAndNeverLogged(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := setup(t, engine.Options{}, api.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	id := b.conversation("alice")
	b.want(b.do("GET", "/v1/conversations/"+id+"?token="+b.viewer, "", nil), 200, "")
	b.want(b.do("GET", "/v1/conversations/"+id+"?token=pk_wrong", "", nil), 401, "unauthorized")
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages?token="+b.alice, "", map[string]any{"content": "hi"}), 201, "")
	// A header token wins over a query token.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages?token="+b.alice, b.viewer, map[string]any{"content": "hi"}), 403, "forbidden")
	out := logs.String()
	for _, secret := range []string{b.viewer, b.alice, b.admin, "pk_wrong", "token="} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, `"route":"GET /v1/conversations/{id}"`) || !strings.Contains(out, `"status":401`) {
		t.Fatalf("the request log lacks route or status:\n%s", out)
	}
}

func TestReplayIsByteForByteTheOriginal(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	path := "/v1/conversations/" + id + "/messages"
	first := b.do("POST", path, b.alice, `{"content": "<b>&</b>", "metadata": {"z": 1, "a": "<i>"}, "clientRequestId": "k1"}`)
	b.want(first, 201, "")
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a first write is marked replayed")
	}
	// The same request: another spacing, another key order inside metadata,
	// the agent naming itself, the default role spelled out, the key in the header.
	again := b.do("POST", path, b.alice, `{"agentId":"alice","role":"assistant","metadata":{"a":"<i>","z":1},"content":"<b>&</b>"}`, "Idempotency-Key", "k1")
	b.want(again, 201, "")
	if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.raw, first.raw) {
		t.Fatalf("replay differs:\n%s\n%s", first.raw, again.raw)
	}
	// Traces replay too.
	tr := `{"type": "trace", "payload": {"step": 1}, "clientRequestId": "t1"}`
	one := b.do("POST", "/v1/conversations/"+id+"/events", b.alice, tr)
	b.want(one, 201, "")
	two := b.do("POST", "/v1/conversations/"+id+"/events", b.alice, tr)
	if two.status != 201 || two.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(one.raw, two.raw) {
		t.Fatalf("trace replay: %d %s\n%s", two.status, one.raw, two.raw)
	}
	b.want(b.do("POST", "/v1/conversations/"+id+"/events", b.alice, `{"type": "trace", "payload": {"step": 2}, "clientRequestId": "t1"}`), 422, "idempotency_mismatch")
	if b.lastSeq(id) != 3 {
		t.Fatalf("lastSeq %v, want 3", b.lastSeq(id))
	}
}

func TestMessageAndTraceReads(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	r := b.do("POST", base+"/messages", b.admin, map[string]any{"agentId": "alice", "id": "m1", "parts": []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "text", "text": "b"}}, "channel": map[string]any{"type": "slack", "id": "C1"}})
	b.want(r, 201, "")
	if r.body["seq"] != 2.0 || r.body["turn"] != 1.0 {
		t.Fatalf("post = %s", r.raw)
	}
	r = b.do("GET", base+"/messages/m1", b.viewer, nil)
	b.want(r, 200, "")
	if r.body["content"] != "ab" || r.body["role"] != "assistant" || r.body["agentId"] != "alice" || r.body["channel"].(map[string]any)["type"] != "slack" {
		t.Fatalf("message = %s", r.raw)
	}
	r = b.do("POST", base+"/events", b.alice, map[string]any{"type": "trace", "id": "t1", "payload": map[string]any{"thought": "hm"}})
	b.want(r, 201, "")
	ev := r.body["event"].(map[string]any)
	if ev["type"] != "trace" || ev["seq"] != 3.0 || ev["agentId"] != "alice" || ev["data"].(map[string]any)["id"] != "t1" {
		t.Fatalf("trace = %s", r.raw)
	}
	r = b.do("GET", base+"/events?after=2", b.viewer, nil)
	if es := r.body["events"].([]any); len(es) != 1 || es[0].(map[string]any)["type"] != "trace" || r.body["nextAfter"] != nil {
		t.Fatalf("events after 2 = %s", r.raw)
	}
	b.want(b.do("GET", "/v1/conversations/nope/messages/m1", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/nope/messages/m1/thread", b.viewer, nil), 404, "not_found")
}

func TestConversationByAgentAndTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "title": "mine", "participants": []string{"alice"}, "turnPolicy": "free", "metadata": map[string]any{"k": "v"}})
	b.want(r, 201, "")
	if c := r.body["conversation"].(map[string]any); c["createdBy"] != "alice" || c["id"] != "c-1" || c["turnPolicy"] != "free" || r.header.Get("Location") != "/v1/conversations/c-1" {
		t.Fatalf("created = %s (Location %q)", r.raw, r.header.Get("Location"))
	}
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": "bad id"}), 422, "invalid_value")

	b.want(b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "root"}), 422, "invalid_value")
	b.want(b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "viewer", "agentId": "x"}), 422, "invalid_value")
	b.want(b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "agent"}), 422, "invalid_value")
	b.want(b.do("POST", "/v1/tokens", b.viewer, map[string]any{"kind": "viewer"}), 403, "forbidden")
	b.want(b.do("DELETE", "/v1/tokens/x", b.alice, nil), 403, "forbidden")
	r = b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "viewer", "name": "dashboard"})
	b.want(r, 201, "")
	if !strings.HasPrefix(r.body["token"].(string), "pk_") || r.body["kind"] != "viewer" || r.body["name"] != "dashboard" || r.body["id"] == "" {
		t.Fatalf("token = %s", r.raw)
	}
	r = b.do("GET", "/v1/tokens", b.admin, nil)
	b.want(r, 200, "")
	if n := len(r.body["tokens"].([]any)); n != 5 {
		t.Fatalf("%d tokens, want 5: %s", n, r.raw)
	}
}

func TestOperations(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var ready error
	var mu sync.Mutex
	b := setup(t, engine.Options{}, api.Options{Registerer: reg, Gatherer: reg, Ready: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return ready
	}})
	r := b.do("GET", "/healthz", "", nil)
	b.want(r, 200, "")
	if r.body["status"] != "ok" {
		t.Fatalf("healthz = %s", r.raw)
	}
	b.want(b.do("GET", "/readyz", "", nil), 200, "")
	mu.Lock()
	ready = errors.New("disk on fire at /secret/path")
	mu.Unlock()
	r = b.do("GET", "/readyz", "", nil)
	b.want(r, 503, "unavailable")
	if bytes.Contains(r.raw, []byte("/secret/path")) {
		t.Fatalf("readyz leaks its cause: %s", r.raw)
	}
	r = b.do("GET", "/metrics", "", nil)
	if r.status != 200 || !strings.Contains(string(r.raw), `parley_http_requests_total{route="GET /readyz",status="503"} 1`) ||
		!strings.Contains(string(r.raw), `parley_http_request_seconds_bucket{route="GET /healthz"`) {
		t.Fatalf("metrics: %d\n%s", r.status, r.raw)
	}
}

// TestInternalErrorsSayNothing: a store failure is a 500 "internal error";
// the cause goes to the log only.
func TestInternalErrorsSayNothing(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := setup(t, engine.Options{}, api.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	b.conversation()
	if err := b.db.Close(); err != nil {
		t.Fatal(err)
	}
	r := b.do("GET", "/v1/conversations", b.viewer, nil)
	if r.status != 500 || r.code() != "internal" || r.body["error"].(map[string]any)["message"] != "internal error" {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	if !strings.Contains(logs.String(), "internal error") {
		t.Fatalf("the cause was not logged:\n%s", logs)
	}
}
