package api_test

// The bad-input suite: every kind of request the server must refuse, sent
// over loopback to a real server on a real SQLite file, each checked for the
// status and error code docs/api.md promises and for having written nothing.
// The runner, stream and slow-subscriber cases are in badinput_stream_test.go,
// numbers and schedules in badinput_bounds_test.go.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/schedule"
)

// Small limits, so that every "too large" case is cheap to send.
const (
	badBodyLimit = 64 << 10 // api.Options.MaxBodyBytes
	badTextLimit = 4 << 10  // conv.Limits.MaxTextBytes
	badSizeLimit = 8 << 10  // conv.Limits.MaxMessageBytes
	badMetaLimit = 512      // conv.Limits.MaxMetadataBytes
	badMaxParts  = 8        // conv.Limits.MaxParts
	badMaxDepth  = 3        // conv.Limits.MaxThreadDepth: at most 2 ancestors
	badMaxTasks  = 1        // schedule.Options.MaxTasksPerAgent: alice has t1
	badMaxQueued = 2        // conv.Limits.MaxQueuedPrompts
	badStreaming = 1        // conv.Limits.MaxStreaming
)

// badLimits are the engine limits of the bad-input fixture.
func badLimits() conv.Limits {
	l := conv.DefaultLimits
	l.MaxTextBytes, l.MaxMetadataBytes, l.MaxParts, l.MaxThreadDepth = badTextLimit, badMetaLimit, badMaxParts, badMaxDepth
	l.MaxQueuedPrompts = badMaxQueued
	l.MaxMessageBytes, l.MaxStreaming = badSizeLimit, badStreaming
	return l
}

// badFixture is a server with small limits and some state to aim at:
// conversation c (alice and bob) holds alice's question q1 (turn 1, closed)
// and bob's answer a1 → a2 (bob's turn 2, open, a2 at the deepest allowed
// depth) and a waiting prompt p1; conversation c2 holds x1; c3 is empty;
// there is a task t1 and a revoked agent token.
type badFixture struct {
	*bundle
	c, c2, c3 string // c3 is empty: no turn open
	revoked   string
}

func newBadFixture(t *testing.T) *badFixture {
	t.Helper()
	return newBadFixtureWith(t, api.Options{})
}

// newBadFixtureWith is newBadFixture with the server's options (its body
// limits are the fixture's).
func newBadFixtureWith(t *testing.T, aopts api.Options) *badFixture {
	t.Helper()
	aopts.MaxBodyBytes, aopts.MaxImportBytes = badBodyLimit, badBodyLimit
	b := setupTasks(t, engine.Options{Limits: badLimits()}, schedule.Options{MaxTasksPerAgent: badMaxTasks}, aopts)
	f := &badFixture{bundle: b, c: b.conversation("alice", "bob"), c2: b.conversation("alice"), c3: b.conversation()}
	msg := func(conv, token string, body map[string]any) {
		t.Helper()
		b.want(b.do("POST", "/v1/conversations/"+conv+"/messages", token, body), 201, "")
	}
	msg(f.c, b.alice, map[string]any{"id": "q1", "role": "user", "content": "question", "finality": "turn"})
	msg(f.c, b.bob, map[string]any{"id": "a1", "replyTo": "q1", "content": "answer"})
	msg(f.c, b.bob, map[string]any{"id": "a2", "replyTo": "a1", "content": "more"})
	msg(f.c2, b.alice, map[string]any{"id": "x1", "content": "elsewhere"})
	b.want(b.do("POST", "/v1/conversations/"+f.c+"/prompts", b.alice, map[string]any{"id": "p1", "content": "later"}), 201, "")
	b.want(b.do("POST", "/v1/tasks", b.alice, map[string]any{"id": "t1", "conversationId": f.c, "prompt": "daily", "cron": "0 9 * * *"}), 201, "")
	r := b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "agent", "agentId": "carol"})
	b.want(r, 201, "")
	f.revoked = r.body["token"].(string)
	if r := b.do("DELETE", "/v1/tokens/"+r.body["id"].(string), b.admin, nil); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	return f
}

// snapshot is everything a refused request must leave as it was: every
// conversation's view, log, messages and prompt queue, the tasks and the
// tokens.
func (b *bundle) snapshot() string { return b.state(true) }

// state is the snapshot, or with full false only the conversations' views
// (whose heads hold each log's last seq: every change to a conversation, its
// messages or its prompts appends to its log), the tasks and the tokens.
func (b *bundle) state(full bool) string {
	b.t.Helper()
	var sb strings.Builder
	get := func(path string) response {
		r := b.do("GET", path, b.admin, nil)
		b.want(r, 200, "")
		sb.Write(r.raw)
		return r
	}
	r := get("/v1/conversations?limit=1000")
	for _, v := range r.body["conversations"].([]any) {
		if !full {
			break
		}
		id := v.(map[string]any)["conversation"].(map[string]any)["id"].(string)
		get("/v1/conversations/" + id + "/events?limit=1000")
		get("/v1/conversations/" + id + "/messages?limit=1000")
		get("/v1/conversations/" + id + "/prompts")
	}
	get("/v1/tasks")
	get("/v1/tokens")
	return sb.String()
}

// badCase is one refused request and the answer the docs promise.
type badCase struct {
	name, method, path string
	token              string // a key of badFixture.token: admin, alice, bob, viewer, none, bogus, revoked, basic
	body               string
	header             []string
	status             int
	code               string
	says               string // the error message must contain this
}

// token turns a case's token name into what is sent.
func (f *badFixture) token(name string) (token string, header []string) {
	switch name {
	case "admin":
		return f.admin, nil
	case "alice":
		return f.alice, nil
	case "bob":
		return f.bob, nil
	case "viewer":
		return f.viewer, nil
	case "none":
		return "", nil
	case "bogus":
		return "pk_0123456789abcdef", nil
	case "revoked":
		return f.revoked, nil
	case "basic":
		return "", []string{"Authorization", "Basic YWxpY2U6eA=="}
	case "empty bearer":
		return "", []string{"Authorization", "Bearer "}
	}
	f.t.Fatalf("unknown token name %q", name)
	return "", nil
}

// run sends every case and checks its answer and that nothing changed:
// the heads, tasks and tokens after each case, everything at the end.
func (f *badFixture) run(t *testing.T, cases []badCase) {
	t.Helper()
	full, before := f.snapshot(), f.state(false)
	rep := strings.NewReplacer("{c}", f.c, "{c2}", f.c2, "{c3}", f.c3)
	for _, c := range cases {
		tok, hdr := f.token(c.token)
		r := f.do(c.method, rep.Replace(c.path), tok, rep.Replace(c.body), append(hdr, c.header...)...)
		msg := ""
		if e, ok := r.body["error"].(map[string]any); ok {
			msg, _ = e["message"].(string)
		}
		if r.status != c.status || r.code() != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %s: got %d %q, want %d %q saying %q: %.300s", c.name, c.method, c.path, r.status, r.code(), c.status, c.code, c.says, r.raw)
		}
		if after := f.state(false); after != before {
			t.Fatalf("%s: a refused request wrote something:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
	if after := f.snapshot(); after != full {
		t.Fatalf("the refused requests wrote something:\nbefore %s\nafter  %s", full, after)
	}
}

// bodyEndpoint is a write endpoint that reads a JSON body, with the token
// that may use it and a body it accepts apart from the field under test.
type bodyEndpoint struct {
	method, path, token string
	// optional bodies may be left out: an empty one is no body.
	optional bool
	// wrong maps each field to a value of the wrong JSON type.
	wrong map[string]string
}

var bodyEndpoints = []bodyEndpoint{
	{"POST", "/v1/conversations", "alice", false, map[string]string{
		"id": `7`, "title": `["t"]`, "participants": `"alice"`, "turnPolicy": `1`, "messageFormat": `false`}},
	{"POST", "/v1/conversations/{c}/messages", "bob", false, map[string]string{
		"id": `1`, "agentId": `{}`, "role": `7`, "content": `42`, "parts": `{"type":"text"}`, "replyTo": `true`,
		"turnId": `[]`, "finality": `1`, "next": `2`, "precondition": `"1"`, "channel": `"slack"`, "clientRequestId": `3`}},
	{"POST", "/v1/conversations/{c}/events", "bob", false, map[string]string{
		"type": `1`, "id": `2`, "agentId": `3`, "turnId": `4`, "finality": `5`, "precondition": `[]`, "clientRequestId": `6`}},
	{"POST", "/v1/conversations/{c}/turns/claim", "alice", false, map[string]string{"agentId": `1`, "expectTurn": `"3"`, "ttlMs": `"1s"`}},
	{"POST", "/v1/conversations/{c}/turns/reset", "alice", false, map[string]string{"agentId": `[]`, "claim": `"yes"`, "ttlMs": `1.5`}},
	{"POST", "/v1/conversations/{c}/turns/abort", "alice", false, map[string]string{"agentId": `5`, "reason": `{}`}},
	{"POST", "/v1/conversations/{c}/delegations", "alice", false, map[string]string{"agentId": `1`, "to": `["w"]`}},
	{"POST", "/v1/conversations/{c}/prompts", "alice", false, map[string]string{
		"id": `1`, "agentId": `2`, "content": `3`, "mode": `4`, "to": `5`, "channel": `6`}},
	{"DELETE", "/v1/conversations/{c}/prompts/p1", "alice", true, map[string]string{"agentId": `1`}},
	{"POST", "/v1/conversations/{c}/prompts/p1/promote", "alice", true, map[string]string{"agentId": `true`}},
	{"POST", "/v1/conversations/{c}/revert", "alice", false, map[string]string{"agentId": `1`, "messageId": `["q1"]`}},
	{"POST", "/v1/tasks", "alice", false, map[string]string{
		"id": `1`, "conversationId": `2`, "agentId": `3`, "prompt": `4`, "cron": `5`, "everyMs": `"1000"`}},
	{"POST", "/v1/tokens", "admin", false, map[string]string{"kind": `1`, "agentId": `2`, "name": `3`}},
}

// TestBadBodiesEveryEndpoint: every endpoint that reads a JSON body refuses
// an oversized body (413), an empty one, malformed, truncated or trailing
// JSON, a non-object, an unknown field and each field with the wrong type
// (400), and writes nothing.
func TestBadBodiesEveryEndpoint(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	big := `{"title":"` + strings.Repeat("x", badBodyLimit) + `"}`
	var cases []badCase
	for _, e := range bodyEndpoints {
		add := func(name, body string, status int, code, says string) {
			cases = append(cases, badCase{name: name, method: e.method, path: e.path, token: e.token, body: body, status: status, code: code, says: says})
		}
		add("oversized", big, 413, "too_large", fmt.Sprint(badBodyLimit))
		add("oversized after the object", `{}`+strings.Repeat(" ", badBodyLimit), 413, "too_large", "")
		if !e.optional {
			add("empty", ``, 400, "invalid_request", "required")
		}
		add("null", `null`, 400, "invalid_request", "object")
		add("array", `[{}]`, 400, "invalid_request", "object")
		add("bare string", `"{}"`, 400, "invalid_request", "object")
		add("malformed", `{"agentId" "alice"}`, 400, "invalid_request", "byte")
		add("truncated", `{"agentId":"al`, 400, "invalid_request", "truncated")
		add("trailing garbage", `{} garbage`, 400, "invalid_request", "nothing after")
		add("second object", `{}{}`, 400, "invalid_request", "nothing after")
		add("invalid UTF-8 outside strings", "{\xff}", 400, "invalid_request", "")
		add("unknown field", `{"replyToMessageId":"q1"}`, 400, "invalid_request", "replyToMessageId")
		for field, v := range e.wrong {
			add("wrong type of "+field, `{"`+field+`":`+v+`}`, 400, "invalid_request", field)
		}
	}
	// Nested fields are named with their path.
	m := "/v1/conversations/{c}/messages"
	cases = append(cases,
		badCase{"nested wrong type", "POST", m, "alice", `{"content":"x","precondition":{"expectTurn":"2"}}`, nil, 400, "invalid_request", "precondition.expectTurn"},
		badCase{"nested bool", "POST", m, "alice", `{"content":"x","precondition":{"startingTurn":1}}`, nil, 400, "invalid_request", "startingTurn"},
		badCase{"part wrong type", "POST", m, "alice", `{"parts":[{"type":"text","text":5}]}`, nil, 400, "invalid_request", "text"},
		badCase{"part not an object", "POST", m, "alice", `{"parts":["hello"]}`, nil, 400, "invalid_request", "parts"},
		badCase{"unknown part field", "POST", m, "alice", `{"parts":[{"type":"text","txt":"x"}]}`, nil, 400, "invalid_request", "txt"},
		badCase{"unknown channel field", "POST", m, "alice", `{"content":"x","channel":{"type":"slack","id":"c","thread":"t"}}`, nil, 400, "invalid_request", "thread"},
		badCase{"number out of range", "POST", m, "alice", `{"content":"x","precondition":{"expectTurn":1e40}}`, nil, 400, "invalid_request", "expectTurn"},
		badCase{"content and parts", "POST", m, "alice", `{"content":"x","parts":[{"type":"text","text":"y"}]}`, nil, 400, "invalid_request", "not both"},
		badCase{"unknown part kind", "POST", m, "alice", `{"parts":[{"type":"hologram"}]}`, nil, 422, "invalid_value", "hologram"},
		badCase{"tool call without a call id", "POST", m, "alice", `{"parts":[{"type":"tool-call","toolName":"t","status":"running"}]}`, nil, 422, "invalid_value", "callId"},
		badCase{"tool call with an unknown status", "POST", m, "alice", `{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"exploded"}]}`, nil, 422, "invalid_value", "exploded"},
		badCase{"finish with an unknown reason", "POST", m, "alice", `{"parts":[{"type":"finish","reason":"bored"}]}`, nil, 422, "invalid_value", "bored"},
		badCase{"unknown role", "POST", m, "alice", `{"role":"oracle","content":"x"}`, nil, 422, "invalid_value", "oracle"},
		badCase{"message with no content", "POST", m, "bob", `{"finality":"turn"}`, nil, 422, "invalid_value", "needs content"},
		badCase{"message with empty content", "POST", m, "bob", `{"content":""}`, nil, 422, "invalid_value", "needs content"},
		badCase{"message with no parts", "POST", m, "bob", `{"parts":[]}`, nil, 422, "invalid_value", "needs content"},
		badCase{"message of empty text parts", "POST", m, "bob", `{"parts":[{"type":"text","text":""},{"type":"text"}]}`, nil, 422, "invalid_value", "needs content"},
		badCase{"message of a finish part alone", "POST", m, "bob", `{"parts":[{"type":"finish","reason":"end_turn"}]}`, nil, 422, "invalid_value", "needs content"},
		badCase{"unknown finality", "POST", m, "alice", `{"finality":"forever","content":"x"}`, nil, 422, "invalid_value", "forever"},
		badCase{"next without finality turn", "POST", m, "alice", `{"next":"bob","content":"x"}`, nil, 422, "invalid_value", "next"},
		badCase{"trace with a finality", "POST", "/v1/conversations/{c}/events", "alice", `{"type":"trace","finality":"turn"}`, nil, 400, "invalid_request", "finality"},
		badCase{"event of another type", "POST", "/v1/conversations/{c}/events", "alice", `{"type":"message"}`, nil, 422, "invalid_value", "message"},
		badCase{"negative ttl", "POST", "/v1/conversations/{c}/turns/claim", "alice", `{"ttlMs":-1}`, nil, 422, "invalid_value", "ttlMs"},
		badCase{"ttl over the limit", "POST", "/v1/conversations/{c3}/turns/claim", "alice", `{"ttlMs":3600000}`, nil, 422, "invalid_value", ""},
		badCase{"unknown prompt mode", "POST", "/v1/conversations/{c}/prompts", "alice", `{"content":"x","mode":"shout"}`, nil, 422, "invalid_value", "shout"},
		badCase{"empty prompt", "POST", "/v1/conversations/{c}/prompts", "alice", `{"content":""}`, nil, 422, "invalid_value", ""},
		badCase{"unknown token kind", "POST", "/v1/tokens", "admin", `{"kind":"root"}`, nil, 422, "invalid_value", "root"},
		badCase{"agent token without agent", "POST", "/v1/tokens", "admin", `{"kind":"agent"}`, nil, 422, "invalid_value", ""},
		badCase{"agent token named like a kind of token", "POST", "/v1/tokens", "admin", `{"kind":"agent","agentId":"admin"}`, nil, 422, "invalid_value", "reserved"},
		badCase{"bad schedule", "POST", "/v1/tasks", "alice", `{"conversationId":"{c}","prompt":"x","cron":"sometimes"}`, nil, 422, "invalid_value", "sometimes"},
		badCase{"idempotency header and body differ", "POST", m, "alice", `{"content":"x","clientRequestId":"k1"}`, []string{"Idempotency-Key", "k2"}, 400, "invalid_request", "differ"},
		badCase{"import not JSON", "POST", "/v1/conversations/import", "admin", `{"format":`, nil, 400, "invalid_request", ""},
		badCase{"import oversized", "POST", "/v1/conversations/import", "admin", `[{"role":"user","content":"` + strings.Repeat("x", badBodyLimit) + `"}]`, nil, 413, "too_large", ""},
	)
	f.run(t, cases)
}

// TestBadSizes: values over the engine's limits are 413 too_large, though
// the body itself is small enough; a prompt past the queue's limit is 409
// busy (the queue drains: it is a "not now", not a "never").
func TestBadSizes(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	for i := range badMaxQueued { // c3's queue is full
		f.want(f.do("POST", "/v1/conversations/"+f.c3+"/prompts", f.alice, map[string]any{"content": fmt.Sprint("queued ", i)}), 201, "")
	}
	m := "/v1/conversations/{c}/messages"
	text := strings.Repeat("y", badTextLimit+1)
	big := strings.Repeat("z", badSizeLimit-badTextLimit+1)
	parts := strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"p"},`, badMaxParts+1), ",")
	meta := `{"k":"` + strings.Repeat("m", badMetaLimit) + `"}`
	many := strings.TrimSuffix(strings.Repeat(`"agent",`, 65), ",")
	f.run(t, []badCase{
		{"text over the limit", "POST", m, "bob", `{"content":"` + text + `"}`, nil, 413, "too_large", ""},
		{"text part over the limit", "POST", m, "bob", `{"parts":[{"type":"text","text":"` + text + `"}]}`, nil, 413, "too_large", ""},
		{"tool result over the message limit", "POST", m, "bob", `{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"completed","result":"` + text + big + `"}]}`, nil, 413, "too_large", "limit is 8192"},
		{"text and tool args together over the message limit", "POST", m, "bob", `{"parts":[{"type":"text","text":"` + text[1:] + `"},{"type":"tool-call","callId":"c","toolName":"t","status":"completed","args":"` + big + `"}]}`, nil, 413, "too_large", "limit is 8192"},
		{"text and error parts together over the message limit", "POST", m, "bob", `{"parts":[{"type":"text","text":"` + text[1:] + `"},{"type":"error","message":"` + big + `"}]}`, nil, 413, "too_large", "limit is 8192"},
		{"too many parts", "POST", m, "bob", `{"parts":[` + parts + `]}`, nil, 413, "too_large", "parts"},
		{"metadata over the limit", "POST", m, "bob", `{"content":"x","metadata":` + meta + `}`, nil, 413, "too_large", "metadata"},
		{"trace payload over the limit", "POST", "/v1/conversations/{c}/events", "bob", `{"type":"trace","payload":` + meta + `}`, nil, 413, "too_large", "payload"},
		{"prompt over the limit", "POST", "/v1/conversations/{c}/prompts", "alice", `{"content":"` + text + `"}`, nil, 413, "too_large", ""},
		{"prompt past the queue's limit", "POST", "/v1/conversations/{c3}/prompts", "alice", `{"content":"x"}`, nil, 409, "busy", "queue"},
		{"steer past the queue's limit", "POST", "/v1/conversations/{c3}/prompts", "alice", `{"content":"x","mode":"steer"}`, nil, 409, "busy", "full"},
		{"task prompt over the limit", "POST", "/v1/tasks", "alice", `{"conversationId":"{c}","prompt":"` + text + `","everyMs":1000}`, nil, 413, "too_large", ""},
		{"abort reason over 1024 bytes", "POST", "/v1/conversations/{c}/turns/abort", "bob", `{"reason":"` + strings.Repeat("r", 1025) + `"}`, nil, 413, "too_large", "reason"},
		{"title over 512 bytes", "POST", "/v1/conversations", "alice", `{"title":"` + strings.Repeat("t", 513) + `"}`, nil, 413, "too_large", "title"},
		{"conversation metadata over the limit", "POST", "/v1/conversations", "alice", `{"metadata":` + meta + `}`, nil, 413, "too_large", "metadata"},
		{"too many participants", "POST", "/v1/conversations", "alice", `{"participants":[` + many + `]}`, nil, 413, "too_large", "participants"},
	})
}

// TestBadIDs: ids over 128 characters, with characters outside
// A-Z a-z 0-9 . _ : -, or "." and ".." (which no path can carry) are 422
// invalid_value wherever a client names one (a malformed parent is 422
// invalid_thread, as an unknown one); in a path they name nothing, so they
// are 404.
func TestBadIDs(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	long := strings.Repeat("a", parley.MaxIDLen+1)
	var cases []badCase
	for _, id := range []string{long, "has space", "slash/id", "é", "semi;colon", `quote\"`, "tab\\t", ".", ".."} {
		add := func(name, method, path, token, body string, status int, code string) {
			cases = append(cases, badCase{name: name + " " + id, method: method, path: path, token: token, body: body, status: status, code: code})
		}
		m := "/v1/conversations/{c}/messages"
		add("conversation id", "POST", "/v1/conversations", "alice", `{"id":"`+id+`"}`, 422, "invalid_value")
		add("participant", "POST", "/v1/conversations", "alice", `{"participants":["alice","`+id+`"]}`, 422, "invalid_value")
		add("message id", "POST", m, "alice", `{"id":"`+id+`","content":"x"}`, 422, "invalid_value")
		add("admin's agentId", "POST", m, "admin", `{"agentId":"`+id+`","content":"x"}`, 422, "invalid_value")
		add("turnId", "POST", m, "alice", `{"turnId":"`+id+`","content":"x"}`, 422, "invalid_value")
		add("next", "POST", m, "bob", `{"next":"`+id+`","finality":"turn","content":"x"}`, 422, "invalid_value")
		add("replyTo", "POST", m, "alice", `{"replyTo":"`+id+`","content":"x"}`, 422, "invalid_thread")
		add("channel type", "POST", m, "admin", `{"agentId":"alice","channel":{"type":"`+id+`","id":"c"},"content":"x"}`, 422, "invalid_value")
		add("clientRequestId", "POST", m, "alice", `{"clientRequestId":"`+id+`","content":"x"}`, 422, "invalid_value")
		add("trace id", "POST", "/v1/conversations/{c}/events", "alice", `{"type":"trace","id":"`+id+`"}`, 422, "invalid_value")
		add("claimer", "POST", "/v1/conversations/{c}/turns/claim", "admin", `{"agentId":"`+id+`"}`, 422, "invalid_value")
		add("delegate", "POST", "/v1/conversations/{c}/delegations", "bob", `{"to":"`+id+`"}`, 422, "invalid_value")
		add("prompt id", "POST", "/v1/conversations/{c}/prompts", "alice", `{"id":"`+id+`","content":"x"}`, 422, "invalid_value")
		add("prompt target", "POST", "/v1/conversations/{c}/prompts", "alice", `{"to":"`+id+`","content":"x"}`, 422, "invalid_value")
		add("revert", "POST", "/v1/conversations/{c}/revert", "alice", `{"messageId":"`+id+`"}`, 422, "invalid_value")
		add("task id", "POST", "/v1/tasks", "alice", `{"id":"`+id+`","conversationId":"{c}","prompt":"x","everyMs":1000}`, 422, "invalid_value")
		add("token agent", "POST", "/v1/tokens", "admin", `{"kind":"agent","agentId":"`+id+`"}`, 422, "invalid_value")
		cases = append(cases, badCase{name: "Idempotency-Key " + id, method: "POST", path: m, token: "alice", body: `{"content":"x"}`,
			header: []string{"Idempotency-Key", id}, status: 422, code: "invalid_value"})
	}
	cases = append(cases,
		badCase{"import id", "POST", "/v1/conversations/import?id=bad%20id", "admin", `{}`, nil, 422, "invalid_value", ""},
		badCase{"runner agentId", "GET", "/v1/conversations/{c}/runner?agentId=bad%20id", "admin", "", nil, 422, "invalid_value", ""},
		badCase{"import id .", "POST", "/v1/conversations/import?id=.", "admin", `{}`, nil, 422, "invalid_value", ""},
		badCase{"import id ..", "POST", "/v1/conversations/import?id=..", "admin", `{}`, nil, 422, "invalid_value", ""},
		badCase{"runner agentId ..", "GET", "/v1/conversations/{c}/runner?agentId=..", "admin", "", nil, 422, "invalid_value", ""},
	)
	// In a path a malformed or overlong id names nothing.
	for _, p := range []string{"/v1/conversations/" + long, "/v1/conversations/bad%20id/messages", "/v1/conversations/{c}/messages/" + long,
		"/v1/conversations/{c}/messages/bad%20id/thread", "/v1/conversations/{c}/messages/" + long + "/replies"} {
		cases = append(cases, badCase{"path " + p, "GET", p, "viewer", "", nil, 404, "not_found", ""})
	}
	cases = append(cases,
		badCase{"message to an overlong conversation", "POST", "/v1/conversations/" + long + "/messages", "alice", `{"content":"x"}`, nil, 404, "not_found", ""},
		badCase{"withdraw an overlong prompt", "DELETE", "/v1/conversations/{c}/prompts/" + long, "alice", "", nil, 404, "not_found", ""},
	)
	f.run(t, cases)
}

// TestBadReferences: unknown conversations, messages, prompts, tasks and
// tokens are 404; replies to a message of another conversation, to itself,
// to an unknown message or too deep are 422 invalid_thread.
func TestBadReferences(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	var cases []badCase
	for _, e := range []struct{ method, path, body string }{
		{"POST", "/messages", `{"content":"x"}`},
		{"POST", "/events", `{"type":"trace"}`},
		{"POST", "/turns/claim", `{}`},
		{"POST", "/turns/reset", `{}`},
		{"POST", "/turns/abort", `{}`},
		{"POST", "/delegations", `{"to":"w"}`},
		{"POST", "/prompts", `{"content":"x"}`},
		{"POST", "/revert", `{"messageId":"q1"}`},
		{"POST", "/abort", ``},
		{"DELETE", "/prompts/p1", ``},
		{"POST", "/prompts/p1/promote", ``},
		{"GET", "", ``}, {"GET", "/messages", ``}, {"GET", "/events", ``}, {"GET", "/prompts", ``},
		{"GET", "/messages/q1", ``}, {"GET", "/messages/q1/thread", ``}, {"GET", "/messages/q1/replies", ``},
		{"GET", "/stream", ``}, {"GET", "/ws", ``}, {"GET", "/runner", ``}, {"GET", "/export", ``},
	} {
		cases = append(cases, badCase{"unknown conversation", e.method, "/v1/conversations/nope" + e.path, "alice", e.body, nil, 404, "not_found", ""})
	}
	m := "/v1/conversations/{c}/messages"
	cases = append(cases,
		badCase{"unknown message", "GET", m + "/nope", "viewer", "", nil, 404, "not_found", ""},
		badCase{"message of another conversation", "GET", m + "/x1", "viewer", "", nil, 404, "not_found", ""},
		badCase{"thread of an unknown message", "GET", m + "/nope/thread", "viewer", "", nil, 404, "not_found", ""},
		badCase{"replies of an unknown message", "GET", m + "/nope/replies", "viewer", "", nil, 404, "not_found", ""},
		badCase{"unknown prompt", "DELETE", "/v1/conversations/{c}/prompts/nope", "alice", "", nil, 404, "not_found", ""},
		badCase{"promote an unknown prompt", "POST", "/v1/conversations/{c}/prompts/nope/promote", "alice", "", nil, 404, "not_found", ""},
		badCase{"abort with nothing answered", "POST", "/v1/conversations/{c}/abort", "alice", "", nil, 404, "not_found", ""},
		badCase{"task for an unknown conversation", "POST", "/v1/tasks", "alice", `{"conversationId":"nope","prompt":"x","everyMs":1000}`, nil, 404, "not_found", ""},
		badCase{"unknown task", "DELETE", "/v1/tasks/nope", "alice", "", nil, 404, "not_found", ""},
		badCase{"unknown token", "DELETE", "/v1/tokens/nope", "admin", "", nil, 404, "not_found", ""},
		badCase{"unknown endpoint", "POST", "/v1/conversations/{c}/nothing", "alice", "{}", nil, 404, "not_found", ""},
		badCase{"wrong method", "PATCH", m, "alice", "{}", nil, 405, "method_not_allowed", ""},
		badCase{"reply to another conversation", "POST", m, "bob", `{"replyTo":"x1","content":"x"}`, nil, 422, "invalid_thread", "x1"},
		badCase{"self reply", "POST", m, "bob", `{"id":"s1","replyTo":"s1","content":"x"}`, nil, 422, "invalid_thread", "itself"},
		badCase{"reply to an unknown message", "POST", m, "bob", `{"replyTo":"nope","content":"x"}`, nil, 422, "invalid_thread", "nope"},
		badCase{"thread too deep", "POST", m, "bob", `{"replyTo":"a2","content":"x"}`, nil, 422, "invalid_thread", "at most 2"},
		badCase{"taken message id", "POST", m, "bob", `{"id":"a1","content":"x"}`, nil, 409, "busy", ""},
		badCase{"taken conversation id", "POST", "/v1/conversations", "alice", `{"id":"{c2}"}`, nil, 409, "busy", ""},
		badCase{"another agent's open turn", "POST", m, "alice", `{"content":"x"}`, nil, 409, "turn_conflict", "bob"},
	)
	f.run(t, cases)
	// An id no message ever had: 404, and nothing written.
	before := f.snapshot()
	f.want(f.do("POST", "/v1/conversations/"+f.c+"/revert", f.alice, `{"messageId":"nope"}`), 404, "not_found")
	if f.snapshot() != before {
		t.Fatal("reverting an unknown id changed something")
	}
}

// TestBadTokens: no token, a malformed, unknown or revoked one is 401; a
// viewer writing, an agent writing as another agent, and a non-admin
// managing tokens, importing or writing a system message are 403.
func TestBadTokens(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	writes := []struct{ method, path, body string }{
		{"POST", "/v1/conversations", `{}`},
		{"POST", "/v1/conversations/{c}/messages", `{"content":"x"}`},
		{"POST", "/v1/conversations/{c}/events", `{"type":"trace"}`},
		{"POST", "/v1/conversations/{c}/turns/claim", `{}`},
		{"POST", "/v1/conversations/{c}/turns/reset", `{}`},
		{"POST", "/v1/conversations/{c}/turns/abort", `{}`},
		{"POST", "/v1/conversations/{c}/delegations", `{"to":"w"}`},
		{"POST", "/v1/conversations/{c}/prompts", `{"content":"x"}`},
		{"DELETE", "/v1/conversations/{c}/prompts/p1", ``},
		{"POST", "/v1/conversations/{c}/prompts/p1/promote", ``},
		{"POST", "/v1/conversations/{c}/abort", ``},
		{"POST", "/v1/conversations/{c}/revert", `{"messageId":"q1"}`},
		{"POST", "/v1/tasks", `{"conversationId":"{c}","prompt":"x","everyMs":1000}`},
		{"DELETE", "/v1/tasks/t1", ``},
		{"POST", "/v1/tokens", `{"kind":"viewer"}`},
		{"DELETE", "/v1/tokens/nope", ``},
		{"POST", "/v1/conversations/import", `{}`},
	}
	var cases []badCase
	for _, w := range writes {
		for _, tok := range []string{"none", "bogus", "revoked", "basic", "empty bearer"} {
			cases = append(cases, badCase{"token " + tok, w.method, w.path, tok, w.body, nil, 401, "unauthorized", ""})
		}
		cases = append(cases, badCase{"viewer", w.method, w.path, "viewer", w.body, nil, 403, "forbidden", ""})
		cases = append(cases, badCase{"token in the query", w.method, w.path + "?token=pk_nope", "none", w.body, nil, 401, "unauthorized", ""})
	}
	for _, w := range writes {
		if w.body == "" || w.body == `{}` || strings.HasPrefix(w.path, "/v1/tokens") || w.path == "/v1/conversations" {
			continue
		}
		other := strings.Replace(w.body, "{", `{"agentId":"bob",`, 1)
		other = strings.Replace(other, ",}", "}", 1)
		cases = append(cases, badCase{"agent token naming another agent", w.method, w.path, "alice", other, nil, 403, "forbidden", "bob"})
	}
	for _, p := range []string{"/turns/claim", "/turns/reset", "/turns/abort", "/prompts/p1/promote"} {
		cases = append(cases, badCase{"agent token naming another agent", "POST", "/v1/conversations/{c}" + p, "alice", `{"agentId":"bob"}`, nil, 403, "forbidden", "bob"})
	}
	cases = append(cases,
		badCase{"agent token naming another agent", "DELETE", "/v1/conversations/{c}/prompts/p1", "alice", `{"agentId":"bob"}`, nil, 403, "forbidden", "bob"},
		badCase{"agent managing tokens", "POST", "/v1/tokens", "alice", `{"kind":"admin"}`, nil, 403, "forbidden", ""},
		badCase{"agent listing tokens", "GET", "/v1/tokens", "alice", "", nil, 403, "forbidden", ""},
		badCase{"agent revoking a token", "DELETE", "/v1/tokens/nope", "bob", "", nil, 403, "forbidden", ""},
		badCase{"agent importing", "POST", "/v1/conversations/import", "alice", `{}`, nil, 403, "forbidden", ""},
		badCase{"agent writing a system message", "POST", "/v1/conversations/{c}/messages", "alice", `{"role":"system","content":"x"}`, nil, 403, "forbidden", ""},
		badCase{"admin without agentId", "POST", "/v1/conversations/{c}/messages", "admin", `{"content":"x"}`, nil, 422, "invalid_value", "agentId"},
		badCase{"admin runner without agentId", "GET", "/v1/conversations/{c}/runner", "admin", "", nil, 422, "invalid_value", "agentId"},
		badCase{"agent runner as another agent", "GET", "/v1/conversations/{c}/runner?agentId=bob", "alice", "", nil, 403, "forbidden", ""},
		badCase{"viewer runner", "GET", "/v1/conversations/{c}/runner", "viewer", "", nil, 403, "forbidden", ""},
		badCase{"reader without a token", "GET", "/v1/conversations/{c}", "none", "", nil, 401, "unauthorized", ""},
		badCase{"stream without a token", "GET", "/v1/conversations/{c}/stream", "bogus", "", nil, 401, "unauthorized", ""},
		badCase{"ws with a revoked token", "GET", "/v1/conversations/{c}/ws", "revoked", "", nil, 401, "unauthorized", ""},
	)
	f.run(t, cases)
}
