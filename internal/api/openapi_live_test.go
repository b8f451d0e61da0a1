package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
)

// conformance checks requests to a real server, and its answers, against
// the OpenAPI document.
type conformance struct {
	*bundle
	srv     *api.Server
	v       validator.Validator
	doc     libopenapi.Document
	schemas schema_validation.SchemaValidator
	checked map[string]bool // "METHOD /path status" answered and checked
}

func newConformance(t *testing.T) *conformance {
	doc, v := openAPIValidator(t)
	b, srv := setupServer(t, engine.Options{}, api.Options{})
	return &conformance{bundle: b, srv: srv, v: v, doc: doc, schemas: schema_validation.NewSchemaValidator(), checked: map[string]bool{}}
}

func describe(errs []*errors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    at %s (%s): %s", f.FieldPath, f.KeywordLocation, f.Reason)
		}
	}
	return b.String()
}

// call sends a request as token, checks it against the document (unless
// it is meant to be refused), checks the status and checks the answer
// against the document.
func (c *conformance) call(method, path, token string, body any, status int, header ...string) response {
	c.t.Helper()
	mk := func() *http.Request { return c.request(method, path, token, body, header...) }
	if status < 400 {
		if ok, errs := c.v.ValidateHttpRequest(mk()); !ok {
			c.t.Errorf("%s %s: the request does not conform to openapi.json:%s", method, path, describe(errs))
		}
	}
	req := mk()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != status {
		c.t.Fatalf("%s %s answered %d, want %d: %s", method, path, res.StatusCode, status, raw)
	}
	if res.Header.Get("Content-Type") == "application/x-ndjson" {
		// JSON Lines, which the validator cannot read as one value: each
		// line is checked against the schema the operation names.
		for line := range bytes.Lines(raw) {
			c.frame("ExportLine", line)
		}
	} else {
		res.Body = io.NopCloser(bytes.NewReader(raw))
		if ok, errs := c.v.ValidateHttpResponse(mk(), res); !ok {
			c.t.Errorf("%s %s: the %d answer does not conform to openapi.json:%s\n%s", method, path, status, describe(errs), raw)
		}
	}
	route, _, _ := strings.Cut(path, "?")
	c.checked[fmt.Sprintf("%s %d", api.RouteOf(c.srv, method, route), status)] = true
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// frame checks one frame of a stream against the named component schema.
func (c *conformance) frame(schema string, data []byte) {
	c.t.Helper()
	model, err := c.doc.BuildV3Model()
	if err != nil {
		c.t.Fatal(err)
	}
	proxy, ok := model.Model.Components.Schemas.Get(schema)
	if !ok {
		c.t.Fatalf("no schema %s", schema)
	}
	if ok, errs := c.schemas.ValidateSchemaBytes(proxy.Schema(), data); !ok {
		c.t.Errorf("a frame does not conform to %s:%s\n%s", schema, describe(errs), data)
	}
}

// TestOpenAPIRealAnswers: a real server's answers to the main endpoints,
// errors included, conform to the document, and so do the requests that
// got them.
func TestOpenAPIRealAnswers(t *testing.T) {
	t.Parallel()
	c := newConformance(t)
	ad := c.admin
	c.call("GET", "/healthz", "", nil, 200)
	c.call("GET", "/readyz", "", nil, 200)
	c.call("GET", "/metrics", "", nil, 200)
	c.call("GET", "/v1/openapi.json", "", nil, 200)
	c.call("GET", "/v1/whoami", c.alice, nil, 200)
	c.call("POST", "/v1/session", "", map[string]any{"token": c.alice}, 200)
	c.call("DELETE", "/v1/session", "", nil, 204)

	v := c.call("POST", "/v1/conversations", ad, map[string]any{"title": "spec", "participants": []string{"alice", "bob"},
		"members": []string{"human"}, "metadata": map[string]any{"k": 1}}, 201)
	id := v.body["conversation"].(map[string]any)["id"].(string)
	cp := "/v1/conversations/" + id
	c.call("GET", cp, c.viewer, nil, 200)
	c.call("GET", "/v1/conversations?limit=1", c.viewer, nil, 200)
	c.call("GET", "/v1/conversations?title=spec", c.alice, nil, 200)
	c.call("PATCH", cp, ad, map[string]any{"title": "spec, changed", "metadata": map[string]any{"k": nil, "j": 2}, "members": map[string]any{"add": []string{"carol"}}}, 200)
	c.call("PATCH", cp, c.alice, map[string]any{"title": "x"}, 403)
	c.call("PATCH", cp, ad, map[string]any{"turnPolicy": "free"}, 422)
	c.call("PATCH", cp, ad, map[string]any{}, 400)

	q := c.call("POST", cp+"/messages", ad, map[string]any{"agentId": "human", "role": "user", "content": "What is 6 x 7?", "finality": "turn"}, 201,
		"Idempotency-Key", "q-1")
	qid := q.body["message"].(map[string]any)["id"].(string)
	c.call("POST", cp+"/messages", ad, map[string]any{"agentId": "human", "role": "user", "content": "What is 6 x 7?", "finality": "turn"}, 201,
		"Idempotency-Key", "q-1")
	c.call("POST", cp+"/events", c.alice, map[string]any{"type": "trace", "payload": map[string]any{"tool": "grep"}}, 201)
	c.call("POST", cp+"/messages", c.alice, map[string]any{"replyTo": qid, "parts": []any{
		map[string]any{"type": "text", "text": "Let me look. "},
		map[string]any{"type": "tool-call", "callId": "c1", "toolName": "calc", "status": "completed", "args": map[string]any{"x": 6}, "result": 42},
		map[string]any{"type": "text", "text": "42"}}, "finality": "turn", "next": "bob",
		"precondition": map[string]any{"expectTurn": 2, "startingTurn": false}}, 201)
	c.call("GET", cp+"/messages?limit=10", c.viewer, nil, 200)
	c.call("GET", cp+"/messages?turnId="+qid+"&agentId=alice", c.viewer, nil, 200)
	c.call("GET", cp+"/messages/"+qid, c.viewer, nil, 200)
	c.call("GET", cp+"/messages/"+qid+"/replies", c.viewer, nil, 200)
	c.call("GET", cp+"/messages/"+qid+"/thread", c.viewer, nil, 200)

	// Turns: bob is named next; alice claims, bob opens and delegates,
	// resets and aborts.
	c.call("POST", cp+"/turns/claim", c.bob, map[string]any{"expectTurn": 3, "ttlMs": 60000}, 200)
	c.call("POST", cp+"/turns/claim", c.alice, map[string]any{}, 409)
	c.call("POST", cp+"/messages", c.bob, map[string]any{"content": "on it"}, 201)
	c.call("POST", cp+"/delegations", c.bob, map[string]any{"to": "bob.worker"}, 200)
	c.call("POST", cp+"/turns/reset", c.bob, map[string]any{}, 200)
	c.call("POST", cp+"/turns/abort", c.bob, map[string]any{"reason": "tool crashed"}, 200)
	c.call("POST", cp+"/turns/reset", c.alice, map[string]any{"claim": true, "ttlMs": 1000}, 200)

	// The queue: nothing runs, so prompts wait.
	p := c.call("POST", cp+"/prompts", ad, map[string]any{"agentId": "human", "content": "first", "to": "alice"}, 201)
	p2 := c.call("POST", cp+"/prompts", ad, map[string]any{"agentId": "human", "content": "second", "mode": "collect",
		"channel": map[string]any{"type": "slack", "id": "C1"}}, 201)
	c.call("GET", cp+"/prompts", c.viewer, nil, 200)
	c.call("GET", cp+"/prompts/"+p.body["id"].(string), c.viewer, nil, 200)
	c.call("GET", cp+"/prompts/"+p.body["id"].(string)+"?wait=1ms", c.viewer, nil, 200)
	c.call("GET", cp+"/prompts/"+p.body["id"].(string)+"?wait=2m", c.viewer, nil, 422)
	c.call("GET", cp+"/prompts/nope", c.viewer, nil, 404)
	c.call("POST", cp+"/prompts/"+p2.body["id"].(string)+"/promote", ad, map[string]any{"agentId": "human"}, 200)
	c.call("DELETE", cp+"/prompts/"+p.body["id"].(string), ad, map[string]any{"agentId": "human"}, 200)
	c.call("GET", cp+"/prompts/"+p.body["id"].(string), c.viewer, nil, 200)
	c.call("POST", cp+"/prompts", ad, map[string]any{"agentId": "human", "content": "busy", "mode": "reject"}, 409)
	c.call("POST", cp+"/abort", c.alice, nil, 404)

	c.call("GET", cp+"/events?after=0&limit=1000", c.viewer, nil, 200)
	if r := c.call("GET", "/v1/search?q=look&limit=5", c.alice, nil, 200); len(r.body["hits"].([]any)) != 1 {
		t.Errorf("the search found %s, want alice's answer", r.raw)
	}
	c.call("GET", "/v1/search?q=%22let+me%22&conversationId="+id, c.viewer, nil, 200)
	c.call("GET", "/v1/search", c.viewer, nil, 400)
	mcpCall := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "read_conversation", "arguments": map[string]any{"conversationId": id}}}
	if r := c.call("POST", "/v1/mcp", c.alice, mcpCall, 200, "Accept", "application/json, text/event-stream"); r.body["result"] == nil {
		t.Errorf("the MCP call answered %s", r.raw)
	}
	c.call("POST", "/v1/mcp", "", mcpCall, 401)
	a2aGet := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": map[string]any{"id": "nope~nope"}}
	if r := c.call("POST", "/v1/a2a/bob", c.alice, a2aGet, 200); r.body["error"] == nil {
		t.Errorf("the A2A call answered %s", r.raw)
	}
	c.call("POST", "/v1/a2a/bob", "", a2aGet, 401)
	c.call("GET", "/v1/a2a/bob/.well-known/agent-card.json", c.viewer, nil, 200)
	c.call("POST", cp+"/revert", ad, map[string]any{"agentId": "human", "messageId": qid}, 200)
	c.call("GET", cp+"/events?after=0&limit=1000", c.viewer, nil, 200)

	// Tasks and tokens.
	task := c.call("POST", "/v1/tasks", c.alice, map[string]any{"conversationId": id, "prompt": "Summarize.", "cron": "0 9 * * 1-5"}, 201)
	c.call("POST", "/v1/tasks", c.alice, map[string]any{"conversationId": id, "prompt": "Tick.", "everyMs": 60000}, 201)
	c.call("GET", "/v1/tasks", c.viewer, nil, 200)
	c.call("DELETE", "/v1/tasks/"+task.body["id"].(string), c.alice, nil, 204)
	tok := c.call("POST", "/v1/tokens", ad, map[string]any{"kind": "agent", "agentId": "carol", "name": "carol on ci"}, 201)
	c.call("GET", "/v1/tokens", ad, nil, 200)
	c.call("DELETE", "/v1/tokens/"+tok.body["id"].(string), ad, nil, 204)
	c.call("GET", "/v1/tokens", ad, nil, 200)

	// Export and import, legacy rows with warnings too.
	exp := c.call("GET", cp+"/export", c.viewer, nil, 200)
	c.call("GET", cp+"/export?format=jsonl", c.viewer, nil, 200)
	c.call("GET", cp+"/export?format=markdown", c.viewer, nil, 200)
	// As exported: an export's header keeps "parley" first.
	c.call("POST", "/v1/conversations/import?id="+id+"-copy", ad, exp.raw, 201)
	c.call("POST", "/v1/conversations/import?id=legacy-1&participants=a1", ad, []any{
		map[string]any{"agentId": "a1", "role": "user", "sender": "human", "content": "Hello", "messageId": "m1"},
		map[string]any{"agentId": "a1", "role": "assistant", "sender": "a1", "content": "Hi", "replyToMessageId": "m9"}}, 201)

	c.call("GET", "/v1/admin/backup", ad, nil, 200)
	c.call("GET", "/v1/admin/backup", c.alice, nil, 403)
	// An outbox row, given up: written to the store, in a conversation of
	// its own (the engine writes one for a streamed reply to a channel).
	now := parley.NewTime(time.Now())
	gone := &parley.Delivery{ID: "outbox:r", ConversationID: "outbox", MessageID: "r", Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "hi",
		CreatedAt: now, NextAttemptAt: now}
	trace := func(seq int64) parley.Event {
		return parley.Event{ConversationID: "outbox", Seq: seq, Type: parley.EventTrace, Finality: parley.FinalityNone, Time: now, Data: []byte(`{"payload":{}}`)}
	}
	if err := c.db.CreateConversation(c.ctx, store.CreateConversationParams{Conversation: parley.Conversation{ID: "outbox", Epoch: "e", Participants: []string{}, CreatedAt: now},
		Events: []parley.Event{trace(1)}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Append(c.ctx, store.AppendParams{ConversationID: "outbox", ExpectSeq: 1, Events: []parley.Event{trace(2)}, Deliveries: []*parley.Delivery{gone}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	gone.Status, gone.Attempts, gone.GaveUpAt, gone.LastError = parley.DeliveryFailed, 1, now, "webhook answered HTTP 404"
	if err := c.db.UpdateDelivery(c.ctx, gone); err != nil {
		t.Fatal(err)
	}
	c.call("GET", "/v1/admin/deliveries?status=failed&limit=10", ad, nil, 200)
	c.call("GET", "/v1/admin/deliveries", c.viewer, nil, 403)
	c.call("GET", "/v1/admin/deliveries?status=lost", ad, nil, 422)

	// Errors, each with the document's error body.
	c.call("GET", "/v1/conversations/nope", c.viewer, nil, 404)
	c.call("GET", "/v1/conversations", "", nil, 401)
	c.call("GET", "/v1/conversations", "not-a-token", nil, 401)
	c.call("POST", "/v1/conversations", c.viewer, map[string]any{}, 403)
	c.call("POST", "/v1/conversations", ad, map[string]any{"turnPolicy": "chaos"}, 422)
	c.call("POST", "/v1/conversations", ad, map[string]any{"titel": "typo"}, 400)
	c.call("POST", cp+"/messages", c.alice, map[string]any{"content": "late", "precondition": map[string]any{"expectTurn": 99, "startingTurn": true}}, 409)
	c.call("POST", cp+"/messages", c.alice, map[string]any{"content": strings.Repeat("x", 2<<20)}, 413)
	c.call("GET", cp+"/messages?limit=5000", c.viewer, nil, 422)
	c.call("DELETE", cp, c.alice, nil, 403)
	c.call("DELETE", cp, ad, nil, 204)
	c.call("GET", cp, c.viewer, nil, 404)

	// Every route but the streams (TestOpenAPIStreamFrames), and stop and
	// the input requests (which need a runner: there too) answered with
	// success here.
	streams := map[string]bool{"GET /v1/conversations/{id}/stream": true, "GET /v1/conversations/{id}/ws": true,
		"GET /v1/conversations/{id}/runner": true, "GET /v1/agents/{agentId}/runner": true, "POST /v1/chat": true,
		"GET /v1/chat/{id}/stream": true, "POST /v1/ag-ui": true, "POST /v1/conversations/{id}/abort": true,
		"GET /v1/conversations/{id}/inputs": true, "POST /v1/conversations/{id}/inputs/{rid}": true}
	for _, route := range api.Routes(c.srv) {
		ok := streams[route]
		for _, status := range []int{200, 201, 202, 204} {
			ok = ok || c.checked[fmt.Sprintf("%s %d", route, status)]
		}
		if !ok {
			t.Errorf("no successful answer of %s was checked against openapi.json", route)
		}
	}
}
