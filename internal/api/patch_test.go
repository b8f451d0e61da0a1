package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/store"
)

// TestPatchConversation changes a conversation after it was made, on
// SQLite and on PostgreSQL: who may, what it changes (the record, the
// lists of conversations, the guidance), the event in the log and on a
// stream, and an export's import keeps the change.
func TestPatchConversation(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		patchConversation(t, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Schema(t)
		patchConversation(t, func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, url) })
	})
}

// conv returns the conversation of a view.
func convOf(r response) map[string]any {
	c, _ := r.body["conversation"].(map[string]any)
	return c
}

func patchConversation(t *testing.T, open func(context.Context) (store.Store, error)) {
	b, _ := setupWrapped(t, open, nil, engine.Options{}, runners.Options{}, api.Options{})
	carol := b.agentToken("carol")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"title": "before", "participants": []string{"alice", "bob"}, "metadata": map[string]any{"a": 1, "b": map[string]any{"c": 2}}})
	b.want(r, 201, "")
	id := convOf(r)["id"].(string)
	path := "/v1/conversations/" + id
	b.post(id, b.bob, "bob's turn", "turn") // round-robin: alice next... after bob
	next, _ := b.openSSE(id, "?after=999")  // as the viewer
	if ev := next(); ev.event != "init" {
		t.Fatalf("first SSE event %q", ev.event)
	}

	// Who may: the owner (alice) and admins; not another agent, even a
	// participant, a viewer, or an agent outside it.
	title := map[string]any{"title": "x"}
	b.want(b.do("PATCH", path, b.bob, title), 403, "forbidden")
	b.want(b.do("PATCH", path, b.viewer, title), 403, "forbidden")
	b.want(b.do("PATCH", path, carol, title), 403, "forbidden")
	b.want(b.do("PATCH", "/v1/conversations/nope", b.admin, title), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations?limit=100", carol, nil), 200, "")
	if r := b.do("GET", "/v1/conversations", carol, nil); strings.Contains(string(r.raw), id) {
		t.Fatalf("carol lists %s before she takes part: %s", id, r.raw)
	}
	seq := b.lastSeq(id)

	r = b.do("PATCH", path, b.alice, map[string]any{
		"title":        "after",
		"metadata":     map[string]any{"a": nil, "b": map[string]any{"c": nil, "d": 3}, "e": "x"},
		"participants": map[string]any{"add": []string{"carol", "alice"}, "remove": []string{"zed"}},
		"members":      map[string]any{"add": []string{"dave"}},
	})
	b.want(r, 200, "")
	c := convOf(r)
	meta, _ := json.Marshal(c["metadata"])
	if c["title"] != "after" || string(meta) != `{"b":{"d":3},"e":"x"}` || !sameList(c["participants"], "alice", "bob", "carol") || !sameList(c["members"], "dave") ||
		c["turnPolicy"] != "round-robin" || c["createdBy"] != "alice" {
		t.Fatalf("patched view: %s", r.raw)
	}
	if g := r.body["guidance"].(map[string]any); g["nextAgentId"] != "carol" {
		t.Fatalf("round-robin after bob with carol added: guidance %v", g)
	}
	if h := r.body["head"].(map[string]any); h["lastSeq"].(float64) != seq+1 {
		t.Fatalf("head after the patch: %v, want seq %v", h, seq+1)
	}
	got := b.do("GET", path, b.viewer, nil)
	if gc := convOf(got); gc["title"] != "after" || !sameList(gc["participants"], "alice", "bob", "carol") {
		t.Fatalf("GET after the patch: %s", got.raw)
	}
	// The event, in the log and on the stream.
	ev := nextOf(next, "conversation.updated")
	e := ev.data
	if ev.event != "conversation.updated" {
		t.Fatalf("SSE after the patch: %q %v", ev.event, e)
	}
	d, _ := e["data"].(map[string]any)
	if d["updatedBy"] != "alice" || d["title"] != "after" || !sameList(d["participants"], "alice", "bob", "carol") || !sameList(d["members"], "dave") || e["agentId"] != "alice" {
		t.Fatalf("conversation.updated: %v", e)
	}
	if !strings.Contains(b.log(id), `"type":"conversation.updated"`) {
		t.Fatalf("log without the event: %s", b.log(id))
	}
	// carol takes part now: she lists it, reads and writes it.
	if r := b.do("GET", "/v1/conversations", carol, nil); !strings.Contains(string(r.raw), id) {
		t.Fatalf("carol does not list %s once added: %s", id, r.raw)
	}
	b.post(id, carol, "carol's turn", "turn")

	// The same patch again changes nothing, and writes nothing.
	seq = b.lastSeq(id)
	b.want(b.do("PATCH", path, b.alice, map[string]any{"title": "after", "participants": map[string]any{"add": []string{"carol"}}, "metadata": map[string]any{"a": nil}}), 200, "")
	if b.lastSeq(id) != seq {
		t.Fatalf("a patch that changes nothing wrote: seq %v, was %v", b.lastSeq(id), seq)
	}

	// An admin removes; the metadata goes with null.
	r = b.do("PATCH", path, b.admin, map[string]any{"members": map[string]any{"remove": []string{"dave"}}, "metadata": nil})
	b.want(r, 200, "")
	if c := convOf(r); c["metadata"] != nil || c["members"] != nil {
		t.Fatalf("after removing dave and the metadata: %s", r.raw)
	}
	if ev := nextOf(next, "conversation.updated"); ev.data["data"].(map[string]any)["updatedBy"] != "admin" {
		t.Fatalf("the admin's event: %v", ev.data)
	}

	// An export imported keeps the change; the Markdown export tells it.
	if md := b.do("GET", path+"/export?format=markdown", b.viewer, nil); !strings.Contains(string(md.raw), "alice changed the conversation") {
		t.Fatalf("the Markdown export does not tell the change:\n%s", md.raw)
	}
	jsonl := b.do("GET", path+"/export?format=jsonl", b.viewer, nil).raw
	b.want(b.do("POST", "/v1/conversations/import?id="+id+"-copy", b.admin, jsonl), 201, "")
	cp := b.do("GET", "/v1/conversations/"+id+"-copy", b.viewer, nil)
	if c := convOf(cp); c["title"] != "after" || !sameList(c["participants"], "alice", "bob", "carol") || c["metadata"] != nil {
		t.Fatalf("the import of the export: %s", cp.raw)
	}
	if r := b.do("GET", "/v1/conversations", carol, nil); !strings.Contains(string(r.raw), id+"-copy") {
		t.Fatalf("carol does not list the imported copy: %s", r.raw)
	}

	// Closed: nothing changes.
	b.post(id, b.alice, "bye", "conversation")
	b.want(b.do("PATCH", path, b.alice, title), 409, "conversation_closed")
}

// nextOf reads SSE events until one of type typ (or an error).
func nextOf(next func() sseEvent, typ string) sseEvent {
	for {
		if ev := next(); ev.event == typ || ev.event == "error" {
			return ev
		}
	}
}

// sameList reports whether v is a JSON list of exactly want.
func sameList(v any, want ...string) bool {
	l, _ := v.([]any)
	if len(l) != len(want) {
		return false
	}
	for i, w := range want {
		if l[i] != w {
			return false
		}
	}
	return true
}

// TestPatchConversationBadInput refuses each bad patch with its status and
// code, and leaves the log as it was.
func TestPatchConversationBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"participants": []string{"alice", "bob"}, "metadata": map[string]any{"big": strings.Repeat("x", 10<<10)}})
	b.want(r, 201, "")
	id := convOf(r)["id"].(string)
	path := "/v1/conversations/" + id
	before := b.log(id)
	many := make([]string, 64)
	for i := range many {
		many[i] = "agent" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	for _, c := range []struct {
		name, body   string
		status       int
		code, saying string
	}{
		{"empty patch", `{}`, 400, "invalid_request", "at least one"},
		{"unknown field", `{"title":"x","turnPolicy":"free"}`, 422, "invalid_value", "turnPolicy"},
		{"id", `{"id":"other"}`, 422, "invalid_value", `"id"`},
		{"messageFormat", `{"messageFormat":"v1"}`, 422, "invalid_value", "messageFormat"},
		{"title of a number", `{"title":5}`, 400, "invalid_request", "title"},
		{"title null", `{"title":null}`, 400, "invalid_request", "title"},
		{"participants of a string", `{"participants":"carol"}`, 400, "invalid_request", "participants"},
		{"add of a string", `{"members":{"add":"carol"}}`, 400, "invalid_request", "add"},
		{"unknown key in a list change", `{"members":{"put":["carol"]}}`, 400, "invalid_request", "put"},
		{"not an object", `["title"]`, 400, "invalid_request", ""},
		{"malformed", `{"title":`, 400, "invalid_request", ""},
		{"bad name to add", `{"participants":{"add":["bad name"]}}`, 422, "invalid_value", "bad name"},
		{"bad name to remove", `{"members":{"remove":["../x"]}}`, 422, "invalid_value", "../x"},
		{"member who is a participant", `{"members":{"add":["bob"]}}`, 422, "invalid_value", "participant already"},
		{"NUL in the title", `{"title":"a\u0000b"}`, 422, "invalid_value", "NUL"},
		{"NUL in the metadata", `{"metadata":{"k":"\u0000"}}`, 422, "invalid_value", "NUL"},
		{"title too long", `{"title":"` + strings.Repeat("t", 513) + `"}`, 413, "too_large", "title"},
		{"metadata too big after the merge", `{"metadata":{"more":"` + strings.Repeat("y", 7<<10) + `"}}`, 413, "too_large", "metadata"},
		{"too many participants", `{"participants":{"add":["` + strings.Join(many, `","`) + `"]}}`, 413, "too_large", "participants"},
	} {
		r := b.do("PATCH", path, b.alice, json.RawMessage(c.body))
		if r.status != c.status || r.code() != c.code || !strings.Contains(string(r.raw), c.saying) {
			t.Errorf("%s: %d %s, want %d %s saying %q", c.name, r.status, r.raw, c.status, c.code, c.saying)
		}
	}
	if after := b.log(id); after != before {
		t.Fatalf("a refused patch wrote:\n%s\n%s", before, after)
	}
}

// TestPatchConversationTurnConflict refuses to remove an agent that owns
// the open turn, is delegated into it or holds the claim: its turn is
// aborted (or ends) first.
func TestPatchConversationTurnConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	carol := b.agentToken("carol")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"participants": []string{"alice", "bob"}, "members": []string{"carol"}})
	b.want(r, 201, "")
	id := convOf(r)["id"].(string)
	path := "/v1/conversations/" + id
	b.post(id, b.bob, "open", "none") // bob owns turn 1
	b.want(b.do("POST", path+"/delegations", b.bob, map[string]any{"to": "carol"}), 200, "")
	before := b.log(id)
	r = b.do("PATCH", path, b.alice, map[string]any{"participants": map[string]any{"remove": []string{"bob"}}})
	b.want(r, 409, "turn_conflict")
	if !strings.Contains(string(r.raw), "abort") || r.body["error"].(map[string]any)["head"] == nil {
		t.Fatalf("409 without advice or head: %s", r.raw)
	}
	b.want(b.do("PATCH", path, b.alice, map[string]any{"members": map[string]any{"remove": []string{"carol"}}}), 409, "turn_conflict")
	if b.log(id) != before {
		t.Fatal("a refused removal wrote")
	}
	b.want(b.do("POST", path+"/turns/abort", b.bob, map[string]any{}), 200, "")
	// With the turn ended, the claim: carol claims the next turn.
	b.want(b.do("POST", path+"/turns/claim", carol, map[string]any{}), 200, "")
	b.want(b.do("PATCH", path, b.alice, map[string]any{"members": map[string]any{"remove": []string{"carol"}}}), 409, "claim_conflict")
	r = b.do("PATCH", path, b.alice, map[string]any{"participants": map[string]any{"remove": []string{"bob"}}})
	b.want(r, 200, "")
	if c := convOf(r); !sameList(c["participants"], "alice") {
		t.Fatalf("after removing bob: %s", r.raw)
	}
}

// TestPatchConversationRemovedMemberLosesAccess removes an agent with a
// live stream and a runner attached: both end, as when a token is
// revoked, and the agent reads and writes the conversation no more.
func TestPatchConversationRemovedMemberLosesAccess(t *testing.T) {
	t.Parallel()
	b, _ := setupRunners(t, engine.Options{}, runners.Options{}, api.Options{})
	carol := b.agentToken("carol")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"participants": []string{"alice", "bob"}, "members": []string{"carol"}})
	b.want(r, 201, "")
	id := convOf(r)["id"].(string)
	path := "/v1/conversations/" + id
	next, _ := b.openSSE(id, "", "Authorization", "Bearer "+carol)
	if ev := next(); ev.event != "init" {
		t.Fatalf("carol's stream: %q", ev.event)
	}
	bobs, _ := b.openSSE(id, "", "Authorization", "Bearer "+b.bob)
	bobs() // init
	runner := b.runnerConn(id, carol)
	b.post(id, b.alice, "hello", "turn")
	for ev := next(); ev.event != "message"; ev = next() {
	}

	b.want(b.do("PATCH", path, b.alice, map[string]any{"members": map[string]any{"remove": []string{"carol"}}}), 200, "")
	for {
		ev := next()
		if ev.event == "conversation.updated" || ev.event == "message" {
			t.Fatalf("carol's stream was sent %s after she was removed", ev.event)
		}
		if ev.event == "error" {
			raw, _ := json.Marshal(ev.data)
			if !strings.Contains(string(raw), "forbidden") || !strings.Contains(string(raw), "no longer") {
				t.Fatalf("carol's stream ended with %s", raw)
			}
			break
		}
	}
	for {
		f := readFrame(t, b.ctx, runner)
		if f["type"] == "error" {
			if e := f["error"].(map[string]any); e["code"] != "forbidden" {
				t.Fatalf("carol's runner: %v", f)
			}
			break
		}
	}
	if _, _, err := runner.Read(b.ctx); websocket.CloseStatus(err) != 4403 {
		t.Fatalf("carol's runner after she was removed: %v, want close 4403", err)
	}
	// bob, still a participant, goes on reading.
	for ev := bobs(); ev.event != "conversation.updated"; ev = bobs() {
	}
	b.want(b.do("GET", path, carol, nil), 403, "forbidden")
	b.want(b.do("GET", path+"/events", carol, nil), 403, "forbidden")
	b.want(b.do("POST", path+"/messages", carol, map[string]any{"content": "still here?"}), 403, "forbidden")
	b.want(b.do("GET", path+"/stream", carol, nil), 403, "forbidden")
	if r := b.do("GET", "/v1/conversations", carol, nil); strings.Contains(string(r.raw), id) {
		t.Fatalf("carol still lists %s: %s", id, r.raw)
	}
}

// TestPatchConversationRemovalEndsConnectionsElsewhere removes an agent
// through one server while its streams (SSE, WebSocket) and its runner
// are on another server of the same store: they end there too, once it
// hears of the write, with forbidden (close code 4403).
func TestPatchConversationRemovalEndsConnectionsElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{Shared: true}, api.Options{})
	carol := b.agentToken("carol")
	r := b.do("POST", "/v1/conversations", b.alice, map[string]any{"participants": []string{"alice", "bob"}, "members": []string{"carol"}})
	b.want(r, 201, "")
	id := convOf(r)["id"].(string)
	srv, here, _ := serveStore(t, unclosed{b.db}, engine.Options{Shared: true}, runners.Options{}, api.Options{})
	node := *b
	node.url = srv.URL
	l := node.streams(id, carol)
	l.runner = node.dialAs(id, carol, "/runner")
	if f := send(t, &node, l.runner, `{"type":"nope"}`); f["type"] != "error" { // served: attached
		t.Fatalf("the runner's answer to a bad frame: %v", f)
	}
	b.want(b.do("PATCH", "/v1/conversations/"+id, b.alice, map[string]any{"members": map[string]any{"remove": []string{"carol"}}}), 200, "")
	here.CatchUp(id, int64(b.lastSeq(id)))
	l.wantEnded(t, 10*time.Second, "forbidden", 4403, "no longer")
	node.want(node.do("GET", "/v1/conversations/"+id+"/messages", carol, nil), 403, "forbidden")
}
