package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

// TestNULIsRefusedEverywhere: the character U+0000, which PostgreSQL
// stores in neither text nor jsonb, is refused in every field of every
// write (as a \u0000 escape: raw, it is no JSON) with 422 invalid_value,
// and in every URL with 400, writing nothing: a value one store keeps and
// the other cannot read would break the other's reads for everyone. An
// escaped backslash followed by "u0000" is text like any other. Rows of
// docs/security.md. So is a JSON number beyond PostgreSQL's numeric.
func TestNULIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	const nul = `a\u0000b`
	m, c := "/v1/conversations/{c}/messages", "/v1/conversations/{c}"
	refused := func(name, method, path, token, body string) badCase {
		return badCase{name: name, method: method, path: path, token: token, body: body, status: 422, code: parley.EINVALIDVALUE, says: "U+0000"}
	}
	cases := []badCase{
		refused("a conversation's title", "POST", "/v1/conversations", "alice", `{"title":"`+nul+`"}`),
		refused("a conversation's metadata", "POST", "/v1/conversations", "alice", `{"metadata":{"k":"`+nul+`"}}`),
		refused("a conversation's metadata key", "POST", "/v1/conversations", "alice", `{"metadata":{"`+nul+`":1}}`),
		refused("a message's content", "POST", m, "bob", `{"content":"`+nul+`"}`),
		refused("a message's text part", "POST", m, "bob", `{"parts":[{"type":"text","text":"`+nul+`"}]}`),
		refused("a tool call's args", "POST", m, "bob", `{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"completed","args":{"q":"`+nul+`"}}]}`),
		refused("a tool call's result", "POST", m, "bob", `{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"completed","result":"`+nul+`"}]}`),
		refused("a tool call's error", "POST", m, "bob", `{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"error","error":"`+nul+`"}]}`),
		refused("an error part", "POST", m, "bob", `{"parts":[{"type":"error","message":"`+nul+`"}]}`),
		refused("a message's metadata", "POST", m, "bob", `{"content":"x","metadata":{"k":"`+nul+`"}}`),
		refused("a channel id", "POST", m, "admin", `{"agentId":"bob","content":"x","channel":{"type":"slack","id":"`+nul+`"}}`),
		refused("a trace's payload", "POST", c+"/events", "bob", `{"type":"trace","payload":{"k":"`+nul+`"}}`),
		refused("a prompt", "POST", c+"/prompts", "alice", `{"content":"`+nul+`"}`),
		refused("a turn's abort reason", "POST", c+"/turns/abort", "bob", `{"reason":"`+nul+`"}`),
		refused("a task's prompt", "POST", "/v1/tasks", "alice", `{"conversationId":"{c}","prompt":"`+nul+`","everyMs":60000}`),
		refused("a token's name", "POST", "/v1/tokens", "admin", `{"kind":"viewer","name":"`+nul+`"}`),
		{name: "a list's title filter", method: "GET", path: "/v1/conversations?title=a%00b", token: "alice", status: 400, code: parley.EINVALID, says: "%00"},
		{name: "a path id", method: "GET", path: "/v1/conversations/a%00b", token: "alice", status: 400, code: parley.EINVALID, says: "%00"},
		{name: "a search", method: "GET", path: "/v1/search?q=a%00b", token: "alice", status: 400, code: parley.EINVALID, says: "%00"},
	}
	f.run(t, cases)

	// A JSON number PostgreSQL's numeric cannot read (an exponent beyond
	// ±1000, more than 1000 digits) is refused as alike, wherever JSON is
	// taken as it is: on PostgreSQL one in a conversation's metadata made
	// every filtered list fail, for everyone.
	huge := func(name, method, path, token, body string) badCase {
		return badCase{name: name, method: method, path: path, token: token, body: body, status: 422, code: parley.EINVALIDVALUE, says: "exponent"}
	}
	f.run(t, []badCase{
		huge("a conversation's metadata, a huge number", "POST", "/v1/conversations", "alice", `{"metadata":{"n":1e200000}}`),
		huge("a conversation's patched metadata, a huge number", "PATCH", c, "admin", `{"metadata":{"n":-1E+1001}}`),
		huge("a message's metadata, a tiny number", "POST", m, "bob", `{"content":"x","metadata":{"n":1e-5000}}`),
		huge("a tool call's args, 1001 digits", "POST", m, "bob", `{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"completed","args":{"n":1`+strings.Repeat("0", 1000)+`}}]}`),
		huge("a trace's payload", "POST", c+"/events", "bob", `{"type":"trace","payload":{"n":9e9999}}`),
	})

	// Text that only looks like the escape is kept as it was written.
	const looks = `a\\u0000b`
	r := f.do("POST", "/v1/conversations/"+f.c+"/messages", f.bob, `{"content":"`+looks+`"}`)
	f.want(r, 201, "")
	if got := r.body["message"].(map[string]any)["content"]; got != `a\u0000b` {
		t.Fatalf("content %q, want the text a\\u0000b", got)
	}
	if !strings.Contains(string(f.do("GET", "/v1/conversations?title=", f.admin, nil).raw), f.c) {
		t.Fatal("the list lost a conversation")
	}
}

// TestNULIsRefusedOnTheRunnerSocket: a runner's text delta, tool update or
// finalize that holds U+0000 is an error frame invalid_value, and the
// message keeps what it had.
func TestNULIsRefusedOnTheRunnerSocket(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice"}, "p1")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"kept"}`)
	before := b.snapshot()
	for _, frame := range []string{
		`{"type":"message.part.text-delta","turnId":"r1","delta":"a\u0000b"}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"read","status":"completed","result":{"out":"\u0000"}}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"kept\u0000"}`,
	} {
		f := send(t, b, run, frame)
		e, _ := f["error"].(map[string]any)
		if f["type"] != "error" || e["code"] != parley.EINVALIDVALUE {
			t.Fatalf("%s answered %v", frame, f)
		}
	}
	if b.snapshot() != before {
		t.Fatal("a refused frame wrote something")
	}
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	if m := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil); m.body["content"] != "kept" {
		t.Fatalf("the message is %s", m.raw)
	}
}
