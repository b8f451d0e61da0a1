package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// accessFixture is alice's conversation with carol (alice created it, so
// she owns it), where bob takes no part, and a worker that alice may bring
// into her open turn. The log holds a message of each of alice and carol, a
// prompt of each waiting, and a task of each.
type accessFixture struct {
	*bundle
	carol, worker            string
	id, base                 string
	taskOfCarol, taskOfAlice string
}

func newAccessFixture(t *testing.T) *accessFixture {
	t.Helper()
	return newAccessFixtureOn(t, engine.Options{})
}

// newAccessFixtureOn is newAccessFixture on an engine of opts.
func newAccessFixtureOn(t *testing.T, opts engine.Options) *accessFixture {
	t.Helper()
	b := setup(t, opts, api.Options{})
	f := &accessFixture{bundle: b}
	f.carol, f.worker = b.agentToken("carol"), b.agentToken("worker")
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
	r = b.do("POST", "/v1/tasks", b.alice, map[string]any{"conversationId": f.id, "prompt": "plan", "everyMs": 3_600_000})
	b.want(r, 201, "")
	f.taskOfAlice = r.body["id"].(string)
	return f
}

// accessCase is one request of the security suite and the answer
// docs/security.md and docs/api.md promise: 403 forbidden unless status
// says otherwise. check, if set, looks at the answer further.
type accessCase struct {
	name, method, path, token string
	body                      map[string]any
	status                    int    // 0: 403
	code                      string // with status: the error code ("" for none)
	check                     func(r response) string
}

// refuse sends each case and checks its answer and that it wrote nothing:
// the whole store is the same before and after it.
func (f *accessFixture) refuse(t *testing.T, cases []accessCase) {
	t.Helper()
	b := f.bundle
	before := b.snapshot()
	for _, c := range cases {
		var body any
		if c.body != nil {
			body = c.body
		}
		status, code := c.status, c.code
		if status == 0 {
			status, code = 403, parley.EFORBIDDEN
		}
		r := b.do(c.method, c.path, c.token, body)
		if r.status != status || r.code() != code {
			t.Errorf("%s: %s %s answered %d %s, want %d %s", c.name, c.method, c.path, r.status, r.raw, status, code)
		} else if c.check != nil {
			if why := c.check(r); why != "" {
				t.Errorf("%s: %s: %s", c.name, why, r.raw)
			}
		}
		if after := b.snapshot(); after != before {
			t.Fatalf("%s: a refused request wrote something", c.name)
		}
	}
}

// heldBy checks that a turn_conflict names the head's open turn and its
// owner, as every 409 of the turn rules does.
func heldBy(owner string, turn float64) func(r response) string {
	return func(r response) string {
		head, _ := r.body["error"].(map[string]any)["head"].(map[string]any)
		open, _ := head["openTurn"].(map[string]any)
		if open["owner"] != owner || open["turn"] != turn {
			return fmt.Sprintf("the error's head does not show turn %v open and owned by %s", turn, owner)
		}
		return ""
	}
}

// resetsNothing checks the answer to a reset by an agent that does not own
// the open turn: nothing written, and the turn it would start is the next.
func resetsNothing(next float64) func(r response) string {
	return func(r response) string {
		if r.body["written"] != false || r.body["wasReset"] != false || r.body["turn"] != next || r.body["seq"] != 0.0 {
			return fmt.Sprintf("want written false, wasReset false, turn %v, seq 0", next)
		}
		return ""
	}
}

// TestAccessRefusals: what an agent may not do in a conversation, each
// refused with 403 forbidden (or, for a member acting on a turn it does not
// own, what the turn rules answer) and nothing written. Rows of
// docs/security.md.
func TestAccessRefusals(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t)
	b := f.bundle
	cases := []accessCase{
		// An agent outside the conversation neither writes nor reads it.
		{name: "an outsider writes", method: "POST", path: f.base + "/messages", token: b.bob, body: map[string]any{"content": "hi"}},
		{name: "an outsider closes it for ever", method: "POST", path: f.base + "/messages", token: b.bob, body: map[string]any{"content": "bye", "finality": "conversation"}},
		{name: "an outsider writes a trace", method: "POST", path: f.base + "/events", token: b.bob, body: map[string]any{"type": "trace", "payload": map[string]any{}}},
		{name: "an outsider claims the floor", method: "POST", path: f.base + "/turns/claim", token: b.bob, body: map[string]any{}},
		{name: "an outsider resets", method: "POST", path: f.base + "/turns/reset", token: b.bob, body: map[string]any{"claim": true}},
		{name: "an outsider aborts a turn", method: "POST", path: f.base + "/turns/abort", token: b.bob, body: map[string]any{}},
		{name: "an outsider delegates", method: "POST", path: f.base + "/delegations", token: b.bob, body: map[string]any{"to": "bob2"}},
		{name: "an outsider queues a prompt", method: "POST", path: f.base + "/prompts", token: b.bob, body: map[string]any{"content": "do it"}},
		{name: "an outsider reverts", method: "POST", path: f.base + "/revert", token: b.bob, body: map[string]any{"messageId": "c1"}},
		{name: "an outsider stops an answer", method: "POST", path: f.base + "/abort", token: b.bob},
		{name: "an outsider schedules a task", method: "POST", path: "/v1/tasks", token: b.bob, body: map[string]any{"conversationId": f.id, "prompt": "p", "everyMs": 60000}},
		{name: "an outsider reads the conversation", method: "GET", path: f.base, token: b.bob},
		{name: "an outsider reads the messages", method: "GET", path: f.base + "/messages", token: b.bob},
		{name: "an outsider reads a message", method: "GET", path: f.base + "/messages/a1", token: b.bob},
		{name: "an outsider reads the replies", method: "GET", path: f.base + "/messages/a1/replies", token: b.bob},
		{name: "an outsider reads a thread", method: "GET", path: f.base + "/messages/a1/thread", token: b.bob},
		{name: "an outsider reads the log", method: "GET", path: f.base + "/events", token: b.bob},
		{name: "an outsider reads the queue", method: "GET", path: f.base + "/prompts", token: b.bob},
		{name: "an outsider exports", method: "GET", path: f.base + "/export", token: b.bob},
		{name: "an outsider follows over SSE", method: "GET", path: f.base + "/stream", token: b.bob},
		// What an agent made is its own, the owner's (alice's) and admins'.
		{name: "a member reverts another's message", method: "POST", path: f.base + "/revert", token: f.carol, body: map[string]any{"messageId": "a1"}},
		{name: "a member withdraws another's prompt", method: "DELETE", path: f.base + "/prompts/pa", token: f.carol},
		{name: "a member promotes another's prompt", method: "POST", path: f.base + "/prompts/pa/promote", token: f.carol},
		{name: "a member deletes another's task", method: "DELETE", path: "/v1/tasks/" + f.taskOfCarol, token: f.worker},
		{name: "an outsider deletes a task", method: "DELETE", path: "/v1/tasks/" + f.taskOfCarol, token: b.bob},
		// Viewers read; they never write.
		{name: "a viewer writes", method: "POST", path: f.base + "/messages", token: b.viewer, body: map[string]any{"agentId": "alice", "content": "hi"}},
	}
	f.refuse(t, cases)
	// Only the owner of the open turn (or an admin) resets, aborts or
	// delegates it; the turn rules answer anyone else (409 turn_conflict,
	// with the head). A reset by another writes nothing and answers with the
	// turn it would start. alice opens turn 3 and keeps it: carol, a member,
	// does not own it.
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"id": "a2", "content": "working on it"}), 201, "")
	f.refuse(t, []accessCase{
		{name: "a member resets another's turn", method: "POST", path: f.base + "/turns/reset", token: f.carol, body: map[string]any{},
			status: 200, check: resetsNothing(4)},
		{name: "a member resets and claims another's turn", method: "POST", path: f.base + "/turns/reset", token: f.carol, body: map[string]any{"claim": true},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("alice", 3)},
		{name: "a member aborts another's turn", method: "POST", path: f.base + "/turns/abort", token: f.carol, body: map[string]any{"reason": "mine now"},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("alice", 3)},
		{name: "a member delegates into another's turn", method: "POST", path: f.base + "/delegations", token: f.carol, body: map[string]any{"to": "worker"},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("alice", 3)},
		{name: "a member delegates itself into another's turn", method: "POST", path: f.base + "/delegations", token: f.carol, body: map[string]any{"to": "carol"},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("alice", 3)},
		{name: "a member writes into another's turn", method: "POST", path: f.base + "/messages", token: f.carol, body: map[string]any{"content": "me too"},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("alice", 3)},
	})
	// The same when the turn's owner is a member and the one who tries is
	// the conversation's owner: a turn is its owner's, not the
	// conversation's.
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "done", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", f.carol, map[string]any{"id": "c2", "content": "my turn"}), 201, "")
	f.refuse(t, []accessCase{
		{name: "the conversation's owner resets a member's turn", method: "POST", path: f.base + "/turns/reset", token: b.alice, body: map[string]any{},
			status: 200, check: resetsNothing(5)},
		{name: "the conversation's owner aborts a member's turn", method: "POST", path: f.base + "/turns/abort", token: b.alice, body: map[string]any{},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("carol", 4)},
		{name: "the conversation's owner delegates into a member's turn", method: "POST", path: f.base + "/delegations", token: b.alice, body: map[string]any{"to": "worker"},
			status: 409, code: parley.ETURNCONFLICT, check: heldBy("carol", 4)},
	})
	before := b.snapshot()
	// The same over WebSocket: the stream and the runner's handshake.
	for _, path := range []string{f.base + "/ws", f.base + "/runner"} {
		if status, code := b.dialError(path, "Authorization", "Bearer "+b.bob); status != 403 || code != parley.EFORBIDDEN {
			t.Errorf("an outsider dials %s: %d %q, want 403 forbidden", path, status, code)
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
	// An agent lists its own tasks only, even in a conversation it owns;
	// admins and viewers list them all.
	for _, c := range []struct {
		who, token string
		want       []string
	}{
		{"alice, the conversation's owner", b.alice, []string{f.taskOfAlice}},
		{"carol", f.carol, []string{f.taskOfCarol}},
		{"bob, an outsider", b.bob, nil},
		{"the worker", f.worker, nil},
		{"a viewer", b.viewer, []string{f.taskOfCarol, f.taskOfAlice}},
		{"an admin", b.admin, []string{f.taskOfCarol, f.taskOfAlice}},
	} {
		r := b.do("GET", "/v1/tasks", c.token, nil)
		b.want(r, 200, "")
		var got []string
		for _, v := range r.body["tasks"].([]any) {
			got = append(got, v.(map[string]any)["id"].(string))
		}
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s lists tasks %v, want %v", c.who, got, c.want)
		}
	}
	// The asker manages its prompt; the owner (alice) manages carol's.
	b.want(b.do("POST", f.base+"/prompts/pc/promote", f.carol, nil), 200, "")
	b.want(b.do("DELETE", f.base+"/prompts/pc", b.alice, nil), 200, "")
	b.want(b.do("DELETE", f.base+"/prompts/pa", b.alice, nil), 200, "")
	// A task is removed by its agent or the owner: alice, the owner,
	// removes carol's.
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
	// A delegate delegates further: bob, who takes no part, reads and
	// writes into the turn too, until it closes.
	b.want(b.do("POST", f.base+"/delegations", f.worker, map[string]any{"to": "bob"}), 200, "")
	b.want(b.do("GET", f.base+"/messages", b.bob, nil), 200, "")
	b.want(b.do("POST", f.base+"/messages", b.bob, map[string]any{"content": "bob's part", "finality": "none"}), 201, "")
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"content": "all done", "finality": "turn"}), 201, "")
	for _, tok := range []string{f.worker, b.bob} {
		b.want(b.do("POST", f.base+"/messages", tok, map[string]any{"content": "one more"}), 403, "forbidden")
		b.want(b.do("GET", f.base+"/messages", tok, nil), 403, "forbidden")
	}

	// An admin attaches a runner as the agent ?agentId= names (carol): it
	// gets carol's prompts, and what it streams is written as carol's.
	u := "ws" + strings.TrimPrefix(b.url, "http") + f.base + "/runner?agentId=carol"
	run, _, err := websocket.Dial(b.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.admin}}})
	if err != nil {
		t.Fatalf("an admin attaching a runner as carol: %v", err)
	}
	t.Cleanup(func() { run.CloseNow() })
	from := b.lastSeq(f.id)
	b.want(b.do("POST", f.base+"/prompts", b.alice, map[string]any{"id": "pq", "content": "carol, sum it up", "to": "carol"}), 201, "")
	if p := until(t, b, run, "prompt"); p["messageId"] != "pq" {
		t.Fatalf("the runner attached as carol got %v, want prompt pq", p)
	}
	answer(t, b, run, "rc", "summed up")
	m := b.do("GET", f.base+"/messages/rc", b.viewer, nil)
	b.want(m, 200, "")
	if m.body["agentId"] != "carol" || m.body["replyTo"] != "pq" || m.body["content"] != "summed up" {
		t.Fatalf("the admin's runner as carol wrote %s", m.raw)
	}
	r := b.do("GET", fmt.Sprintf("%s/events?after=%d", f.base, int64(from)), b.viewer, nil)
	b.want(r, 200, "")
	seen := map[string]bool{}
	for _, v := range r.body["events"].([]any) {
		e := v.(map[string]any)
		typ := e["type"].(string)
		data, _ := e["data"].(map[string]any)
		if typ != "message" && typ != "chunk" && typ != "message.updated" || data["id"] != "rc" && data["messageId"] != "rc" {
			continue
		}
		seen[typ] = true
		if e["agentId"] != "carol" {
			t.Errorf("the %s event of seq %v is written as %v, want carol", typ, e["seq"], e["agentId"])
		}
	}
	if len(seen) != 3 {
		t.Errorf("the answer's events: %v, want message, chunk and message.updated", seen)
	}
	if q := b.queue(f.id); len(q) != 0 {
		t.Errorf("the queue after the runner answered: %v", q)
	}
}

// TestStopAndRevertWhileStreaming: bob's runner cannot revert the answer
// to alice's prompt while it streams, nor can bob revert it over HTTP or
// stop it; alice, who asked, can stop it.
func TestStopAndRevertWhileStreaming(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"runner"}, "members": []string{"alice", "bob"}})
	b.want(r, 201, "")
	id := r.body["conversation"].(map[string]any)["id"].(string)
	base := "/v1/conversations/" + id
	tok, _, err := b.tokens.CreateToken(b.ctx, parley.TokenAgent, "runner", "")
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

// TestWhoStopsAnAnswer: besides the asker (TestStopAndRevertWhileStreaming),
// the answer to a prompt is stopped over HTTP by the runner answering it,
// by the conversation's owner and by an admin; another member, before
// each, is refused and writes nothing.
func TestWhoStopsAnAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	carol, runner := b.agentToken("carol"), b.agentToken("runner")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"participants": []string{"runner"}, "members": []string{"carol", "bob"}})
	b.want(r, 201, "")
	base := "/v1/conversations/" + r.body["conversation"].(map[string]any)["id"].(string)
	run := b.runnerConn(strings.TrimPrefix(base, "/v1/conversations/"), runner)
	for i, stopper := range []struct{ who, token string }{{"the runner answering it", runner}, {"the conversation's owner", b.alice}, {"an admin", b.admin}} {
		pid := fmt.Sprintf("p%d", i)
		b.want(b.do("POST", base+"/prompts", carol, map[string]any{"id": pid, "content": "go on"}), 201, "")
		if p := until(t, b, run, "prompt"); p["messageId"] != pid {
			t.Fatalf("the runner got %v, want prompt %s", p, pid)
		}
		do(t, b, run, `{"type":"message.create","turnId":"r`+pid+`"}`)
		do(t, b, run, `{"type":"message.part.text-delta","turnId":"r`+pid+`","delta":"half"}`)
		before := b.snapshot()
		b.want(b.do("POST", base+"/abort", b.bob, nil), 403, parley.EFORBIDDEN)
		if after := b.snapshot(); after != before {
			t.Fatal("a refused stop wrote something")
		}
		b.want(b.do("POST", base+"/abort", stopper.token, nil), 202, "")
		if f := until(t, b, run, "abort"); f["messageId"] != pid {
			t.Fatalf("%s stopped the answer: abort frame %v, want one for %s", stopper.who, f, pid)
		}
		do(t, b, run, `{"type":"aborted"}`)
	}
}

// TestSteerStopsOnlyWhatItsAskerMay: a member who may not stop the answer
// to carol's prompt (403 on POST …/abort) may not stop it with a steer
// either: the steer is queued, first in line, and waits for the answer to
// end; the runner is told nothing. carol's own steer stops it.
func TestSteerStopsOnlyWhatItsAskerMay(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	carol, runner := b.agentToken("carol"), b.agentToken("runner")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"participants": []string{"runner"}, "members": []string{"carol", "bob"}})
	b.want(r, 201, "")
	id := r.body["conversation"].(map[string]any)["id"].(string)
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, runner)
	b.want(b.do("POST", base+"/prompts", carol, map[string]any{"id": "p1", "content": "go on"}), 201, "")
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"half"}`)
	b.want(b.do("POST", base+"/abort", b.bob, nil), 403, parley.EFORBIDDEN)
	b.want(b.do("POST", base+"/prompts", b.bob, map[string]any{"id": "bobs", "content": "do mine now", "mode": "steer"}), 201, "")
	if q := strings.Join(b.queue(id), " "); q != "p1* bobs" {
		t.Fatalf("queue after bob's steer: %s", q)
	}
	if h := b.promptHistory(id, "p1"); slices.ContainsFunc(h, func(e string) bool { return strings.HasPrefix(e, "prompt.aborted") }) {
		t.Fatalf("bob's steer aborted carol's prompt: %v", h)
	}
	// The answer goes on to its end; then bob's steer is next.
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":" and done"}`)
	do(t, b, run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	do(t, b, run, `{"type":"complete"}`)
	if p := until(t, b, run, "prompt"); p["messageId"] != "bobs" {
		t.Fatalf("after the answer the runner got %v, want bob's steer", p)
	}
	if m := b.do("GET", base+"/messages/r1", b.viewer, nil); m.body["status"] != "complete" || m.body["content"] != "half and done" {
		t.Fatalf("carol's answer: %s", m.raw)
	}
	// carol may stop the answer to her prompt: her steer does.
	b.want(b.do("POST", base+"/prompts", carol, map[string]any{"id": "p2", "content": "and then"}), 201, "")
	do(t, b, run, `{"type":"complete"}`) // bob's steer, answered with nothing
	until(t, b, run, "prompt")
	b.want(b.do("POST", base+"/prompts", carol, map[string]any{"id": "carols", "content": "instead", "mode": "steer"}), 201, "")
	if f := until(t, b, run, "abort"); f["messageId"] != "p2" {
		t.Fatalf("carol's steer: abort frame %v, want one for p2", f)
	}
}

// TestWhoami: each token learns who it acts as; an open server says so.
func TestWhoami(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	for tok, want := range map[string]string{b.alice: `{"agentId":"alice","cookie":false,"kind":"agent","open":false}`, b.viewer: `{"agentId":"","cookie":false,"kind":"viewer","open":false}`,
		b.admin: `{"agentId":"","cookie":false,"kind":"admin","open":false}`} {
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
