package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestPromptRetriesAreIdempotent: a prompt sent again with the same
// Idempotency-Key (or clientRequestId) and body is queued once, and the
// retry gets the original answer (its id, made by the server, too); another
// body under the key is 422 idempotency_mismatch. Before, the header was
// silently ignored and a retried prompt was queued twice.
func TestPromptRetriesAreIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	path := "/v1/conversations/" + id + "/prompts"
	first := b.do("POST", path, b.bob, map[string]any{"content": "once", "to": "nobody"}, "Idempotency-Key", "k1")
	b.want(first, 201, "")
	again := b.do("POST", path, b.bob, map[string]any{"content": "once", "to": "nobody"}, "Idempotency-Key", "k1")
	b.want(again, 201, "")
	if again.header.Get("Idempotent-Replayed") != "true" || again.body["id"] != first.body["id"] || again.body["seq"] != first.body["seq"] {
		t.Fatalf("the retry answered %s (replayed %q), want %s", again.raw, again.header.Get("Idempotent-Replayed"), first.raw)
	}
	byBody := b.do("POST", path, b.bob, map[string]any{"content": "once", "to": "nobody", "clientRequestId": "k1"})
	b.want(byBody, 201, "")
	if byBody.body["id"] != first.body["id"] {
		t.Fatalf("the key in the body is another request: %s", byBody.raw)
	}
	if q := b.queue(id); len(q) != 1 {
		t.Fatalf("the queue holds %v after three sends of one prompt", q)
	}
	before := b.snapshot()
	b.want(b.do("POST", path, b.bob, map[string]any{"content": "another", "to": "nobody"}, "Idempotency-Key", "k1"), 422, parley.EIDEMPOTENCY)
	b.want(b.do("POST", path, b.bob, map[string]any{"content": "x", "clientRequestId": "k2"}, "Idempotency-Key", "k3"), 400, parley.EINVALID)
	if b.snapshot() != before {
		t.Fatal("a refused prompt wrote something")
	}
	// Keys are each agent's own: alice's k1 is another request.
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "once", "to": "nobody"}, "Idempotency-Key", "k1"), 201, "")
	if q := b.queue(id); len(q) != 2 {
		t.Fatalf("the queue holds %v, want bob's prompt and alice's", q)
	}
}

// TestWritesThatKeepNoKeyRefuseIt: every write endpoint but posting a
// message, a trace or a prompt refuses an Idempotency-Key (400), instead of
// ignoring it and writing twice when retried; nothing is written.
func TestWritesThatKeepNoKeyRefuseIt(t *testing.T) {
	t.Parallel()
	b, srv := setupServer(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	before := b.snapshot()
	keeps := map[string]bool{"POST /v1/conversations/{id}/messages": true, "POST /v1/conversations/{id}/events": true, "POST /v1/conversations/{id}/prompts": true}
	n := 0
	for _, route := range api.Routes(srv) {
		method, path, _ := strings.Cut(route, " ")
		if method == http.MethodGet || keeps[route] {
			continue
		}
		n++
		path = strings.NewReplacer("{id}", id, "{pid}", "p", "{agentId}", "alice").Replace(path)
		r := b.do(method, path, b.admin, map[string]any{}, "Idempotency-Key", "k")
		if r.status != 400 || r.code() != parley.EINVALID || !strings.Contains(string(r.raw), "Idempotency-Key") {
			t.Errorf("%s with an Idempotency-Key: %d %s, want 400 saying it takes none", route, r.status, r.raw)
		}
	}
	if n < 15 {
		t.Fatalf("only %d write routes were tried", n)
	}
	if b.snapshot() != before {
		t.Fatal("a refused write wrote something")
	}
}
