package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestA2ABadInput: malformed JSON, a bad envelope, an unknown method, bad
// params, an empty message, push notifications, a viewer's send, another's
// task: each a JSON-RPC error with HTTP 200; no token is 401 and a body
// over the bound 413, before JSON-RPC.
func TestA2ABadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/a2a/bob", "", rpcCall("GetTask", map[string]any{"id": "x"})), 401, "unauthorized")
	huge := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"x":"` + strings.Repeat("a", 5<<20) + `"}}`
	if r := b.do("POST", "/v1/a2a/bob", b.alice, huge); r.status != 413 {
		t.Fatalf("a huge body: %d", r.status)
	}
	empty := a2aMessage("m-1", "", "x", nil)
	empty["message"].(map[string]any)["parts"] = []any{}
	file := a2aMessage("m-1", "", "x", nil)
	file["message"].(map[string]any)["parts"] = []any{map[string]any{"url": "https://example.com/f.txt"}}
	for _, c := range []struct {
		name  string
		token string
		body  any
		code  float64
		data  string
	}{
		{"malformed", b.alice, `{"jsonrpc":"2.0",`, -32700, ""},
		{"no version", b.alice, `{"id":1,"method":"GetTask","params":{}}`, -32600, ""},
		{"unknown method", b.alice, rpcCall("tasks/list", map[string]any{}), -32601, ""},
		{"params not an object", b.alice, rpcCall("GetTask", []any{1}), -32602, ""},
		{"no message", b.alice, rpcCall("SendMessage", map[string]any{}), -32602, ""},
		{"empty parts", b.alice, rpcCall("SendMessage", empty), -32602, ""},
		{"a file part", b.alice, rpcCall("SendMessage", file), -32602, ""},
		{"push", b.alice, rpcCall("CreateTaskPushNotificationConfig", map[string]any{}), -32003, ""},
		{"viewer send", b.viewer, rpcCall("SendMessage", a2aMessage("m-1", "", "x", nil)), -32000, "forbidden"},
		{"admin without agentId", b.admin, rpcCall("SendMessage", a2aMessage("m-1", "", "x", nil)), -32602, "invalid_value"},
		{"unknown task", b.alice, rpcCall("GetTask", map[string]any{"id": "nope~nope"}), -32001, "not_found"},
		{"a task id of no form", b.alice, rpcCall("GetTask", map[string]any{"id": "nope"}), -32001, "not_found"},
	} {
		r := b.rpc("bob", c.token, c.body)
		if code, data := rpcErr(r); code != c.code || c.data != "" && data != c.data {
			t.Errorf("%s: %v", c.name, r)
		}
	}
	// Alice's conversation with bob is not carol's to read: its task is
	// not found for her.
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-1", "c-1", "Hi", map[string]any{"returnImmediately": true})))
	if code, _ := rpcErr(b.rpc("bob", b.agentToken("carol"), rpcCall("GetTask", map[string]any{"id": "c-1~m-1"}))); code != -32001 {
		t.Fatalf("another's task: %v", code)
	}
}

// TestA2AStreamsAreGuarded: an A2A stream, and a blocking send, are
// connections of their token: past its bound a send is 429 and writes
// nothing; revoking the token ends the stream with a JSON-RPC error
// saying so. A new context counts toward the creation rate.
func TestA2AStreamsAreGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 2, CreateRate: 0.001, CreateBurst: 1}})
	secret, tok, err := b.tokens.CreateToken(b.ctx, parley.TokenAgent, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	st := events(t, b.postJSON("/v1/a2a/bob", secret, rpcCall("SendStreamingMessage", a2aMessage("m-1", "carols", "one", nil))))
	blocking := make(chan response, 1)
	go func() {
		blocking <- b.do("POST", "/v1/a2a/bob", secret, rpcCall("SendMessage", a2aMessage("m-2", "carols", "two", nil)))
	}()
	waitFor(t, func() bool {
		r := b.do("GET", "/v1/conversations/carols/prompts", b.admin, nil)
		q, _ := r.body["prompts"].([]any)
		return len(q) == 2
	})
	before := b.snapshot()
	if r := b.do("POST", "/v1/a2a/bob", secret, rpcCall("SendStreamingMessage", a2aMessage("m-3", "carols", "three", nil))); r.status != 429 {
		t.Fatalf("a third connection of the token: %d %s", r.status, r.raw)
	}
	if after := b.snapshot(); after != before {
		t.Fatalf("a refused send wrote:\nbefore %s\nafter  %s", before, after)
	}
	b.want(b.do("DELETE", "/v1/tokens/"+tok.ID, b.admin, nil), 204, "")
	evs := st.all()
	if last := evs[len(evs)-1].data; !strings.Contains(last, `"error"`) || !strings.Contains(last, "revoked") {
		t.Fatalf("the stream of a revoked token ends with %s", last)
	}
	<-blocking
	// A new context is a conversation made: within the creation rate.
	b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-4", "", "four", map[string]any{"returnImmediately": true})))
	if _, data := rpcErr(b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-5", "", "five", map[string]any{"returnImmediately": true})))); data != "rate_limited" {
		t.Fatalf("a second new context past the creation rate: %v", data)
	}
}
