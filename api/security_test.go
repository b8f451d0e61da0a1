package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
)

// accessFixture is alice's conversation with carol (alice created it, so
// she owns it), where bob takes no part, and a worker that alice may bring
// into her open turn. The log holds a message of each of alice and carol, a
// prompt of each waiting, and a task of carol's.
type accessFixture struct {
	*bundle
	carol, worker string
	id, base      string
	taskOfCarol   string
}

func newAccessFixture(t *testing.T) *accessFixture {
	t.Helper()
	b := setup(t, engine.Options{}, api.Options{})
	f := &accessFixture{bundle: b}
	mk := func(agent string) string {
		s, _, err := b.eng.CreateToken(b.ctx, parley.TokenAgent, agent, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.carol, f.worker = mk("carol"), mk("worker")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"title": "alice and carol", "participants": []string{"alice", "carol"}, "turnPolicy": "free"})
	b.want(r, 201, "")
	f.id = r.body["conversation"].(map[string]any)["id"].(string)
	f.base = "/v1/conversations/" + f.id
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"id": "a1", "content": "from alice", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", f.carol, map[string]any{"id": "c1", "content": "from carol", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/prompts", b.alice, map[string]any{"id": "pa", "content": "alice asks", "to": "nobody"}), 201, "")
	b.want(b.do("POST", f.base+"/prompts", f.carol, map[string]any{"id": "pc", "content": "carol asks", "to": "nobody"}), 201, "")
	r = b.do("POST", "/v1/tasks", f.carol, map[string]any{"conversationId": f.id, "prompt": "report", "everyMs": 3_600_000})
	b.want(r, 201, "")
	f.taskOfCarol = r.body["id"].(string)
	return f
}

// TestAccessRefusals: what an agent may not do in a conversation, each
// refused with 403 forbidden and nothing written. Rows of docs/security.md.
func TestAccessRefusals(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t)
	b := f.bundle
	cases := []struct {
		name, method, path, token string
		body                      map[string]any
	}{
		// An agent outside the conversation neither writes nor reads it.
		{"an outsider writes", "POST", f.base + "/messages", b.bob, map[string]any{"content": "hi"}},
		{"an outsider closes it for ever", "POST", f.base + "/messages", b.bob, map[string]any{"content": "bye", "finality": "conversation"}},
		{"an outsider writes a trace", "POST", f.base + "/events", b.bob, map[string]any{"type": "trace", "payload": map[string]any{}}},
		{"an outsider claims the floor", "POST", f.base + "/turns/claim", b.bob, map[string]any{}},
		{"an outsider resets", "POST", f.base + "/turns/reset", b.bob, map[string]any{"claim": true}},
		{"an outsider aborts a turn", "POST", f.base + "/turns/abort", b.bob, map[string]any{}},
		{"an outsider delegates", "POST", f.base + "/delegations", b.bob, map[string]any{"to": "bob2"}},
		{"an outsider queues a prompt", "POST", f.base + "/prompts", b.bob, map[string]any{"content": "do it"}},
		{"an outsider reverts", "POST", f.base + "/revert", b.bob, map[string]any{"messageId": "c1"}},
		{"an outsider stops an answer", "POST", f.base + "/abort", b.bob, nil},
		{"an outsider schedules a task", "POST", "/v1/tasks", b.bob, map[string]any{"conversationId": f.id, "prompt": "p", "everyMs": 60000}},
		{"an outsider reads the conversation", "GET", f.base, b.bob, nil},
		{"an outsider reads the messages", "GET", f.base + "/messages", b.bob, nil},
		{"an outsider reads a message", "GET", f.base + "/messages/a1", b.bob, nil},
		{"an outsider reads the replies", "GET", f.base + "/messages/a1/replies", b.bob, nil},
		{"an outsider reads a thread", "GET", f.base + "/messages/a1/thread", b.bob, nil},
		{"an outsider reads the log", "GET", f.base + "/events", b.bob, nil},
		{"an outsider reads the queue", "GET", f.base + "/prompts", b.bob, nil},
		{"an outsider exports", "GET", f.base + "/export", b.bob, nil},
		{"an outsider follows over SSE", "GET", f.base + "/stream", b.bob, nil},
		// What an agent made is its own, the owner's (alice's) and admins'.
		{"a member reverts another's message", "POST", f.base + "/revert", f.carol, map[string]any{"messageId": "a1"}},
		{"a member withdraws another's prompt", "DELETE", f.base + "/prompts/pa", f.carol, nil},
		{"a member promotes another's prompt", "POST", f.base + "/prompts/pa/promote", f.carol, nil},
		{"a member deletes another's task", "DELETE", "/v1/tasks/" + f.taskOfCarol, f.worker, nil},
		{"an outsider deletes a task", "DELETE", "/v1/tasks/" + f.taskOfCarol, b.bob, nil},
		// Viewers read; they never write.
		{"a viewer writes", "POST", f.base + "/messages", b.viewer, map[string]any{"agentId": "alice", "content": "hi"}},
	}
	before := b.snapshot()
	for _, c := range cases {
		var body any
		if c.body != nil {
			body = c.body
		}
		r := b.do(c.method, c.path, c.token, body)
		if r.status != 403 || r.code() != parley.EFORBIDDEN {
			t.Errorf("%s: %s %s answered %d %s, want 403 forbidden", c.name, c.method, c.path, r.status, r.raw)
		}
		if after := b.snapshot(); after != before {
			t.Fatalf("%s: a refused request wrote something", c.name)
		}
	}
	// The same over WebSocket: the stream and the runner's handshake.
	for _, path := range []string{f.base + "/ws", f.base + "/runner"} {
		u := "ws" + strings.TrimPrefix(b.url, "http") + path
		_, resp, err := websocket.Dial(b.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.bob}}})
		if err == nil || resp == nil || resp.StatusCode != 403 {
			t.Errorf("an outsider dials %s: %v, %+v, want 403", path, err, resp)
		}
	}
	// bob does not see the conversation in his list.
	r := b.do("GET", "/v1/conversations", b.bob, nil)
	if cs := r.body["conversations"].([]any); len(cs) != 0 {
		t.Errorf("bob lists %d conversations", len(cs))
	}
	if after := b.snapshot(); after != before {
		t.Fatal("a refused request wrote something")
	}
}

// TestAccessAllowed: what each may do, by the same rules.
func TestAccessAllowed(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t)
	b := f.bundle
	// Members, viewers and admins read; alice and carol list it.
	for _, tok := range []string{b.alice, f.carol, b.viewer, b.admin} {
		b.want(b.do("GET", f.base+"/messages", tok, nil), 200, "")
	}
	if cs := b.do("GET", "/v1/conversations", f.carol, nil).body["conversations"].([]any); len(cs) != 1 {
		t.Errorf("carol lists %d conversations", len(cs))
	}
	// The asker manages its prompt; the owner (alice) manages carol's.
	b.want(b.do("POST", f.base+"/prompts/pc/promote", f.carol, nil), 200, "")
	b.want(b.do("DELETE", f.base+"/prompts/pc", b.alice, nil), 200, "")
	b.want(b.do("DELETE", f.base+"/prompts/pa", b.alice, nil), 200, "")
	// A task is removed by its agent or the owner; carol removes hers.
	b.want(b.do("DELETE", "/v1/tasks/"+f.taskOfCarol, b.alice, nil), 204, "")
	// A member reverts what is all its own; the owner reverts anybody's.
	b.want(b.do("POST", f.base+"/messages", f.carol, map[string]any{"id": "c2", "content": "again", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/revert", f.carol, map[string]any{"messageId": "c2"}), 200, "")
	b.want(b.do("POST", f.base+"/revert", b.alice, map[string]any{"messageId": "c1"}), 200, "")
	// The owner of the open turn brings a worker into it, for that turn.
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"id": "a2", "content": "working on it"}), 201, "")
	b.want(b.do("POST", f.base+"/delegations", b.alice, map[string]any{"to": "worker"}), 200, "")
	b.want(b.do("GET", f.base+"/messages", f.worker, nil), 200, "")
	b.want(b.do("POST", f.base+"/messages", f.worker, map[string]any{"content": "done the part", "finality": "none"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "all done", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", f.worker, map[string]any{"content": "one more"}), 403, "forbidden")
	b.want(b.do("GET", f.base+"/messages", f.worker, nil), 403, "forbidden")
}

// TestStopAndRevertWhileStreaming: bob's runner cannot revert alice's
// message while hers streams; carol cannot stop the answer to alice's
// prompt; alice, who asked, can.
func TestStopAndRevertWhileStreaming(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"runner"}, "members": []string{"alice", "bob"}})
	b.want(r, 201, "")
	id := r.body["conversation"].(map[string]any)["id"].(string)
	base := "/v1/conversations/" + id
	tok, _, err := b.eng.CreateToken(b.ctx, parley.TokenAgent, "runner", "")
	if err != nil {
		t.Fatal(err)
	}
	run := b.runnerConn(id, tok)
	b.want(b.do("POST", base+"/prompts", b.alice, map[string]any{"id": "p1", "content": "go"}), 201, "")
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"half"}`)
	bobs := b.runnerConn(id, b.bob)
	before := b.snapshot()
	if f := send(t, b, bobs, `{"type":"reverted","messageIds":["r1"]}`); f["type"] != "error" || f["error"].(map[string]any)["code"] != parley.EFORBIDDEN {
		t.Fatalf("bob's runner reverting the streaming answer: %v", f)
	}
	b.want(b.do("POST", base+"/revert", b.bob, map[string]any{"messageId": "p1"}), 403, "forbidden")
	b.want(b.do("POST", base+"/abort", b.bob, nil), 403, "forbidden")
	if after := b.snapshot(); after != before {
		t.Fatal("a refused request wrote something")
	}
	b.want(b.do("POST", base+"/abort", b.alice, nil), 202, "")
	if f := until(t, b, run, "abort"); f["messageId"] != "p1" {
		t.Fatalf("abort frame %v", f)
	}
}

// TestWhoami: each token learns who it acts as; an open server says so.
func TestWhoami(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	for tok, want := range map[string]string{b.alice: `{"agentId":"alice","kind":"agent","open":false}`, b.viewer: `{"agentId":"","kind":"viewer","open":false}`,
		b.admin: `{"agentId":"","kind":"admin","open":false}`} {
		if r := b.do("GET", "/v1/whoami", tok, nil); r.status != 200 || strings.TrimSpace(string(r.raw)) != want {
			t.Errorf("whoami: %d %s, want %s", r.status, r.raw, want)
		}
	}
	b.want(b.do("GET", "/v1/whoami", "", nil), 401, "unauthorized")
	open := setup(t, engine.Options{}, api.Options{Open: true})
	if r := open.do("GET", "/v1/whoami", "", nil); !strings.Contains(string(r.raw), `"open":true`) || r.body["kind"] != "admin" {
		t.Errorf("open whoami: %s", r.raw)
	}
}
