package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// mcpBearer adds a Parley token to each request of an MCP client.
type mcpBearer struct{ token string }

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the go-sdk's own client to /v1/mcp with token.
func mcpSession(t *testing.T, b *bundle, token string) *gomcp.ClientSession {
	t.Helper()
	c := gomcp.NewClient(&gomcp.Implementation{Name: "parley-test", Version: "1"}, nil)
	cs, err := c.Connect(b.ctx, &gomcp.StreamableClientTransport{Endpoint: b.url + "/v1/mcp",
		HTTPClient: &http.Client{Transport: mcpBearer{token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns its result: its structured content
// decoded, or its error text (isError).
func callTool(t *testing.T, b *bundle, cs *gomcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(b.ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*gomcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return nil, strings.Join(text, " ")
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, raw, err)
	}
	return out, ""
}

// mustTool is callTool that fails the test on a tool error.
func mustTool(t *testing.T, b *bundle, cs *gomcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	out, e := callTool(t, b, cs, name, args)
	if e != "" {
		t.Fatalf("%s %v: %s", name, args, e)
	}
	return out
}

// wantToolError calls a tool that must fail with code.
func wantToolError(t *testing.T, b *bundle, cs *gomcp.ClientSession, name string, args map[string]any, code string) string {
	t.Helper()
	out, e := callTool(t, b, cs, name, args)
	if !strings.HasPrefix(e, code+": ") {
		t.Fatalf("%s %v: got %v %q, want a %s tool error", name, args, out, e, code)
	}
	return e
}

// TestMCPToolsPostAndRead: the tools are listed with their schemas; an
// agent lists its conversations, posts, and reads the messages page by
// page with the cursor.
func TestMCPToolsPostAndRead(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	cs := mcpSession(t, b, b.alice)

	tools, err := cs.ListTools(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Fatalf("tool %s has no description or schema", tl.Name)
		}
	}
	slices.Sort(names)
	if want := "answer_input ask_agent claim_turn list_conversations post_message read_conversation search_messages wait_for_turn"; strings.Join(names, " ") != want {
		t.Fatalf("tools %v, want %s", names, want)
	}

	if l := mustTool(t, b, cs, "list_conversations", map[string]any{"involves": "nobody"}); len(l["conversations"].([]any)) != 0 {
		t.Fatalf("a filter on an agent who takes part in nothing lists %v", l)
	}
	list := mustTool(t, b, cs, "list_conversations", map[string]any{"title": "t", "participant": "bob", "involves": "alice"})
	if cv := list["conversations"].([]any); len(cv) != 1 || cv[0].(map[string]any)["conversation"].(map[string]any)["id"] != id {
		t.Fatalf("alice lists %v", list)
	}
	for i, text := range []string{"one", "two", "three"} {
		args := map[string]any{"conversationId": id, "content": text}
		if i == 2 {
			args["finality"], args["next"] = "turn", "bob"
		}
		if i == 0 {
			args["clientRequestId"] = "first-post"
		}
		res := mustTool(t, b, cs, "post_message", args)
		if res["message"].(map[string]any)["agentId"] != "alice" {
			t.Fatalf("posted %v", res)
		}
		if i == 0 {
			// Retried with its clientRequestId: the first answer, nothing
			// written; other arguments under the same id are refused.
			again := mustTool(t, b, cs, "post_message", args)
			if again["message"].(map[string]any)["id"] != res["message"].(map[string]any)["id"] {
				t.Fatalf("the retry wrote %v after %v", again, res)
			}
			wantToolError(t, b, cs, "post_message", map[string]any{"conversationId": id, "content": "uno", "clientRequestId": "first-post"}, "idempotency_mismatch")
			wantToolError(t, b, cs, "post_message", map[string]any{"conversationId": id, "content": "uno", "clientRequestId": "not an id"}, "invalid_value")
		}
	}
	var got []string
	after := 0.0
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("the cursor does not end")
		}
		r := mustTool(t, b, cs, "read_conversation", map[string]any{"conversationId": id, "after": after, "limit": 2})
		for _, m := range r["messages"].([]any) {
			got = append(got, m.(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string))
		}
		next, ok := r["nextAfter"].(float64)
		if !ok {
			if g := r["guidance"].(map[string]any); g["nextAgentId"] != "bob" {
				t.Fatalf("the guidance after alice's turn is %v", g)
			}
			break
		}
		after = next
	}
	if strings.Join(got, " ") != "one two three" {
		t.Fatalf("read %v", got)
	}
	hits := mustTool(t, b, cs, "search_messages", map[string]any{"q": "three"})
	if h := hits["hits"].([]any); len(h) != 1 {
		t.Fatalf("search found %v", hits)
	}
	// Bob claims his turn and opens it: alice writing into it is refused,
	// with what to do.
	bob := mcpSession(t, b, b.bob)
	if c := mustTool(t, b, bob, "claim_turn", map[string]any{"conversationId": id, "ttlMs": 60000}); c["head"].(map[string]any)["claim"].(map[string]any)["agentId"] != "bob" {
		t.Fatalf("bob's claim: %v", c)
	}
	wantToolError(t, b, cs, "claim_turn", map[string]any{"conversationId": id}, "claim_conflict")
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.bob, map[string]any{"content": "thinking"}), 201, "")
	e := wantToolError(t, b, cs, "post_message", map[string]any{"conversationId": id, "content": "more"}, "turn_conflict")
	if !strings.Contains(e, "wait_for_turn") {
		t.Fatalf("the error %q does not say what to do", e)
	}
}

// TestMCPWaitForTurn: bob's wait_for_turn, following the conversation,
// returns when alice ends her turn naming him, with her message; a wait
// for a turn that does not come ends timed out.
func TestMCPWaitForTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	bob := mcpSession(t, b, b.bob)
	done := make(chan map[string]any, 1)
	go func() {
		out, e := callTool(t, b, bob, "wait_for_turn", map[string]any{"conversationId": id, "timeoutSeconds": 120})
		if e != "" {
			t.Error(e)
		}
		done <- out
	}()
	for !b.eng.Following(id) { // the wait follows the live feed
		select {
		case out := <-done:
			t.Fatalf("the wait returned before alice's turn: %v", out)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": "your turn, bob", "finality": "turn", "next": "bob"})
	b.want(r, 201, "")
	out := <-done
	if out == nil || out["yourTurn"] != true || out["guidance"].(map[string]any)["nextAgentId"] != "bob" {
		t.Fatalf("bob's wait returned %v", out)
	}
	ms := out["messages"].([]any)
	if len(ms) != 1 || ms[0].(map[string]any)["agentId"] != "alice" {
		t.Fatalf("bob's wait brought %v", ms)
	}
	// Now it is bob's: alice waits in vain.
	alice := mcpSession(t, b, b.alice)
	w := mustTool(t, b, alice, "wait_for_turn", map[string]any{"conversationId": id, "timeoutSeconds": 1, "after": ms[0].(map[string]any)["seq"]})
	if w["yourTurn"] != false || w["timedOut"] != true || len(w["messages"].([]any)) != 0 {
		t.Fatalf("alice's wait returned %v", w)
	}
	// Bob closes the conversation: a wait ends at once, not timed out.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.bob, map[string]any{"content": "bye", "finality": "conversation"}), 201, "")
	w = mustTool(t, b, alice, "wait_for_turn", map[string]any{"conversationId": id, "timeoutSeconds": 120})
	if w["yourTurn"] != false || w["timedOut"] == true || w["head"].(map[string]any)["closed"] != true {
		t.Fatalf("a wait in a closed conversation returned %v", w)
	}
}

// TestMCPAskAgent: alice asks bob through ask_agent; bob's runner answers
// and the tool returns the answer's message.
func TestMCPAskAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	r := dialFrames(t, b, "/v1/conversations/"+id+"/runner", b.bob)
	alice := mcpSession(t, b, b.alice)
	done := make(chan map[string]any, 1)
	go func() {
		out, e := callTool(t, b, alice, "ask_agent", map[string]any{"conversationId": id, "to": "bob", "content": "is it safe?", "timeoutSeconds": 120})
		if e != "" {
			t.Error(e)
		}
		done <- out
	}()
	p := r.next("prompt")
	if !strings.Contains(string(mustJSON(p)), "is it safe?") {
		t.Fatalf("the runner got %v", p)
	}
	for _, f := range []map[string]any{
		{"type": "message.create", "turnId": "b1"},
		{"type": "message.part.text-delta", "turnId": "b1", "delta": "yes, ship it"},
		{"type": "message.finalize", "turnId": "b1", "reason": "end_turn"},
		{"type": "complete"},
	} {
		if a := r.send(f); a["type"] != "ack" {
			t.Fatalf("%v: %v", f["type"], a)
		}
	}
	out := <-done
	if out == nil || out["state"] != "completed" || out["answer"].(map[string]any)["agentId"] != "bob" ||
		!strings.Contains(string(mustJSON(out["answer"])), "yes, ship it") {
		t.Fatalf("ask_agent returned %v", out)
	}
	// Alice has no runner: an ask of her times out with the
	// prompt's id and state.
	w := mustTool(t, b, alice, "ask_agent", map[string]any{"conversationId": id, "to": "alice", "content": "anyone?", "timeoutSeconds": 1})
	if w["timedOut"] != true || w["promptId"] == "" || w["state"] == "completed" {
		t.Fatalf("the unanswered ask returned %v", w)
	}
	// An ask retried with its promptId waits for the prompt asked before:
	// the queue holds it once.
	for range 2 {
		w := mustTool(t, b, alice, "ask_agent", map[string]any{"conversationId": id, "to": "alice", "content": "again?", "promptId": "retry1", "timeoutSeconds": 1})
		if w["timedOut"] != true || w["promptId"] != "retry1" {
			t.Fatalf("the retried ask returned %v", w)
		}
	}
	q := b.do("GET", "/v1/conversations/"+id+"/prompts", b.alice, nil)
	if n := strings.Count(string(q.raw), `"retry1"`); q.status != 200 || n != 1 {
		t.Fatalf("the queue holds retry1 %d times: %s", n, q.raw)
	}
	// Another's prompt id is not the caller's to wait for.
	if _, e := callTool(t, b, mcpSession(t, b, b.bob), "ask_agent", map[string]any{"conversationId": id, "to": "alice", "content": "mine?", "promptId": "retry1", "timeoutSeconds": 1}); e == "" {
		t.Fatal("bob waited for alice's prompt")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestMCPAnswerInput: a person (an admin acting as "human") answers an
// agent's approval through answer_input; the runner gets the answer.
func TestMCPAnswerInput(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	cp, r := askingConversation(t, b)
	ask(t, r, "r1", nil)
	id := strings.TrimPrefix(cp, "/v1/conversations/")
	admin := mcpSession(t, b, b.admin)
	// An admin must say whom it acts as.
	wantToolError(t, b, admin, "answer_input", map[string]any{"conversationId": id, "requestId": "r1", "answer": map[string]any{"approved": true}}, "invalid_value")
	out := mustTool(t, b, admin, "answer_input", map[string]any{"conversationId": id, "agentId": "human", "requestId": "r1", "answer": map[string]any{"approved": true}})
	if out["input"].(map[string]any)["status"] != "answered" {
		t.Fatalf("answer_input returned %v", out)
	}
	if f := r.next("input.answered"); f["requestId"] != "r1" || f["answeredBy"] != "human" {
		t.Fatalf("the runner got %v", f)
	}
}

// TestMCPAccess: the tools have exactly the token's rights: a viewer reads
// but may not write, an agent not in the conversation gets forbidden, no
// token gets 401; refused writes leave nothing behind.
func TestMCPAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	before := b.log(id)
	viewer := mcpSession(t, b, b.viewer)
	mustTool(t, b, viewer, "read_conversation", map[string]any{"conversationId": id})
	wantToolError(t, b, viewer, "post_message", map[string]any{"conversationId": id, "content": "hi"}, "forbidden")
	wantToolError(t, b, viewer, "wait_for_turn", map[string]any{"conversationId": id}, "forbidden")
	carol := mcpSession(t, b, b.agentToken("carol"))
	wantToolError(t, b, carol, "read_conversation", map[string]any{"conversationId": id}, "forbidden")
	wantToolError(t, b, carol, "post_message", map[string]any{"conversationId": id, "content": "hi"}, "forbidden")
	wantToolError(t, b, carol, "ask_agent", map[string]any{"conversationId": id, "to": "bob", "content": "hi"}, "forbidden")
	if l := mustTool(t, b, carol, "list_conversations", nil); len(l["conversations"].([]any)) != 0 {
		t.Fatalf("carol lists %v", l)
	}
	alice := mcpSession(t, b, b.alice)
	wantToolError(t, b, alice, "post_message", map[string]any{"conversationId": id, "agentId": "bob", "content": "as bob"}, "forbidden")
	if b.log(id) != before {
		t.Fatal("a refused call wrote to the log")
	}
	// Behind a proxy that passes the public name on, a token's call is
	// served as any other endpoint's.
	list := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
	r := b.do("POST", "/v1/mcp", b.viewer, list, "Host", "parley.example.com", "Accept", "application/json, text/event-stream")
	if r.status != 200 || r.body["result"] == nil {
		t.Fatalf("a call through a proxy: %d %s", r.status, r.raw)
	}
	r = b.do("POST", "/v1/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	b.want(r, 401, "unauthorized")
	r = b.do("POST", "/v1/mcp", "not-a-token", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	b.want(r, 401, "unauthorized")
}

// TestMCPBadInput: missing, malformed and oversized arguments are refused
// with the API's codes and write nothing.
func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	limits := conv.DefaultLimits
	limits.MaxTextBytes = 1000
	b := setup(t, engine.Options{Limits: limits}, api.Options{MaxBodyBytes: 64 << 10})
	id := b.conversation("alice", "bob")
	before := b.log(id)
	alice := mcpSession(t, b, b.alice)
	if _, e := callTool(t, b, alice, "post_message", map[string]any{"content": "no conversation"}); !strings.Contains(e, "conversationId") {
		t.Fatalf("a call without conversationId: %q", e)
	}
	wantToolError(t, b, alice, "post_message", map[string]any{"conversationId": "../x", "content": "hi"}, "invalid_value")
	wantToolError(t, b, alice, "post_message", map[string]any{"conversationId": id, "content": "hi", "finality": "forever"}, "invalid_value")
	wantToolError(t, b, alice, "post_message", map[string]any{"conversationId": id, "content": strings.Repeat("x", 2000)}, "too_large")
	wantToolError(t, b, alice, "read_conversation", map[string]any{"conversationId": id, "limit": 1000}, "invalid_value")
	wantToolError(t, b, alice, "read_conversation", map[string]any{"conversationId": id, "after": -1}, "invalid_value")
	wantToolError(t, b, alice, "wait_for_turn", map[string]any{"conversationId": id, "timeoutSeconds": 121}, "invalid_value")
	wantToolError(t, b, alice, "search_messages", map[string]any{"q": " "}, "invalid_request")
	wantToolError(t, b, alice, "list_conversations", map[string]any{"limit": 101}, "invalid_value")
	if _, err := alice.CallTool(b.ctx, &gomcp.CallToolParams{Name: "post_message", Arguments: map[string]any{"conversationId": id, "content": strings.Repeat("x", 100<<10)}}); err == nil {
		t.Fatal("a body over MaxBodyBytes was taken")
	}
	big := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "post_message",
		"arguments": map[string]any{"conversationId": id, "content": strings.Repeat("x", 100<<10)}}}
	b.want(b.do("POST", "/v1/mcp", b.alice, big, "Accept", "application/json, text/event-stream"), 413, "too_large")
	if b.log(id) != before {
		t.Fatal("a refused call wrote to the log")
	}
}

// TestMCPPagesAreBoundedInBytes: a page of messages ends after the one
// that brings it to 256 KiB, and says where to go on.
func TestMCPPagesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	for range 3 {
		b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"content": strings.Repeat("x", 200<<10)}), 201, "")
	}
	cs := mcpSession(t, b, b.viewer)
	seen, after := 0, 0.0
	for page := 0; seen < 3; page++ {
		if page > 3 {
			t.Fatal("the pages do not end")
		}
		r := mustTool(t, b, cs, "read_conversation", map[string]any{"conversationId": id, "after": after})
		n := len(r["messages"].([]any))
		if n > 2 {
			t.Fatalf("a page holds %d messages of 200 KiB", n)
		}
		seen += n
		if seen < 3 {
			after = r["nextAfter"].(float64)
		}
	}
}

// TestMCPWaitsAreConnections: a wait counts as one of its token's
// connections (past the bound: rate_limited), and revoking the token ends
// it.
func TestMCPWaitsAreConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 1}})
	id := b.conversation("alice", "bob")
	secret, tok, err := b.tokens.CreateToken(b.ctx, parley.TokenAgent, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	bob := mcpSession(t, b, secret)
	done := make(chan string, 1)
	go func() {
		_, e := callTool(t, b, bob, "wait_for_turn", map[string]any{"conversationId": id, "timeoutSeconds": 120})
		done <- e
	}()
	for !b.eng.Following(id) {
		time.Sleep(5 * time.Millisecond)
	}
	wantToolError(t, b, bob, "ask_agent", map[string]any{"conversationId": id, "to": "alice", "content": "hi"}, "rate_limited")
	b.want(b.do("DELETE", "/v1/tokens/"+tok.ID, b.admin, nil), 204, "")
	if e := <-done; !strings.HasPrefix(e, "unauthorized: ") {
		t.Fatalf("the wait of a revoked token ended with %q", e)
	}
	if q := b.do("GET", "/v1/conversations/"+id+"/prompts", b.viewer, nil); len(q.body["prompts"].([]any)) != 0 {
		t.Fatalf("the refused ask queued %s", q.raw)
	}
}
