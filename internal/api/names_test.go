package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// takenID checks a 409 busy that names the id already taken.
func takenID(id string) func(r response) string {
	return func(r response) string {
		if e, _ := r.body["error"].(map[string]any); e["id"] != id || e["head"] == nil {
			return "the refusal does not name id " + id + " and carry the head"
		}
		return ""
	}
}

// TestIDsAreNeverTakenTwice: an id that names a message or prompt of a
// conversation (alice's message, a prompt waiting, one withdrawn, a message
// reverted) is never taken by another write, whoever writes it and
// whatever kind of thing the write makes: 409 busy naming the id, and
// nothing written, so the message keeps its author and words in its row,
// its events, the search and the export. Rows of docs/security.md.
func TestIDsAreNeverTakenTwice(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t)
	b := f.bundle
	// alice withdraws a prompt and reverts a message of her own: their ids
	// stay taken.
	b.want(b.do("POST", f.base+"/prompts", b.alice, map[string]any{"id": "withdrawn", "content": "never mind", "to": "nobody"}), 201, "")
	b.want(b.do("DELETE", f.base+"/prompts/withdrawn", b.alice, nil), 200, "")
	b.want(b.do("POST", f.base+"/messages", b.alice, map[string]any{"id": "reverted", "content": "oops", "finality": "turn"}), 201, "")
	b.want(b.do("POST", f.base+"/revert", b.alice, map[string]any{"messageId": "reverted"}), 200, "")
	export := b.do("GET", f.base+"/export?format=jsonl", b.admin, nil)
	b.want(export, 200, "")

	var cases []accessCase
	for _, id := range []string{"a1", "pa", "withdrawn", "reverted"} {
		cases = append(cases,
			accessCase{name: "carol queues a prompt under id " + id, method: "POST", path: f.base + "/prompts", token: f.carol,
				body: map[string]any{"id": id, "content": "carol's words"}, status: 409, code: parley.EBUSY, check: takenID(id)},
			accessCase{name: "carol posts a message under id " + id, method: "POST", path: f.base + "/messages", token: f.carol,
				body: map[string]any{"id": id, "content": "carol's words"}, status: 409, code: parley.EBUSY, check: takenID(id)},
			accessCase{name: "an admin queues a prompt under id " + id, method: "POST", path: f.base + "/prompts", token: b.admin,
				body: map[string]any{"agentId": "carol", "id": id, "content": "carol's words"}, status: 409, code: parley.EBUSY, check: takenID(id)},
		)
	}
	f.refuse(t, cases)

	if m := b.do("GET", f.base+"/messages/a1", b.viewer, nil); m.status != 200 || m.body["agentId"] != "alice" || m.body["content"] != "from alice" {
		t.Fatalf("alice's message is now %s", m.raw)
	}
	hits := b.do("GET", "/v1/search?q=from+alice&conversationId="+f.id, b.admin, nil)
	if b.want(hits, 200, ""); !strings.Contains(string(hits.raw), `"a1"`) {
		t.Fatalf("the search no longer finds alice's words: %s", hits.raw)
	}
	if again := b.do("GET", f.base+"/export?format=jsonl", b.admin, nil); string(again.raw) != string(export.raw) {
		t.Fatal("the export changed")
	}
}

// TestAnsweredPromptsKeepTheirIDs: once a runner has answered a prompt, the
// prompt's id (its message's) and the answer's are taken: a prompt under
// either is refused, and so is a runner's message.create that names one.
func TestAnsweredPromptsKeepTheirIDs(t *testing.T) {
	t.Parallel()
	b, id, run := answering(t, []string{"alice"}, "p1")
	answer(t, b, run, "r1", "the answer")
	base := "/v1/conversations/" + id
	for _, taken := range []string{"p1", "r1"} {
		r := b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": taken, "content": "again"})
		b.want(r, 409, parley.EBUSY)
		if why := takenID(taken)(r); why != "" {
			t.Fatal(why, string(r.raw))
		}
	}
	b.prompt(id, "p2", "")
	if p := until(t, b, run, "prompt"); p["messageId"] != "p2" {
		t.Fatalf("prompt frame %v, want p2", p)
	}
	for _, taken := range []string{"p1", "r1"} {
		f := send(t, b, run, `{"type":"message.create","turnId":"`+taken+`"}`)
		e, _ := f["error"].(map[string]any)
		if f["type"] != "error" || e["code"] != parley.EBUSY || e["id"] != taken {
			t.Fatalf("message.create under taken id %s answered %v", taken, f)
		}
	}
	if m := b.do("GET", base+"/messages/r1", b.viewer, nil); m.body["content"] != "the answer" {
		t.Fatalf("the answer is now %s", m.raw)
	}
}

// TestChatQuestionUnderAnothersID: a chat question (the AI SDK's, or an
// AG-UI run) whose id names another's message is asked under a new id;
// the other's message stays as it was.
func TestChatQuestionUnderAnothersID(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := "names-chat"
	st := events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u1", "first", "to", "alice")))
	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	st.all()
	for i, body := range []map[string]any{
		chatBody(id, "r1", "my words"),
		{"threadId": id, "runId": "r1", "messages": []any{map[string]any{"id": "x", "role": "user", "content": "my words"}}},
	} {
		path := []string{"/v1/chat", "/v1/ag-ui"}[i]
		resp := b.postJSON(path, b.bob, body)
		p := until(t, b, run, "prompt")
		if p["messageId"] == "r1" || p["content"] != "my words" {
			t.Fatalf("%s: the question under alice's answer's id was asked as %v", path, p)
		}
		do(t, b, run, `{"type":"complete"}`)
		resp.Body.Close()
	}
	if m := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil); m.body["agentId"] != "alice" || m.body["role"] != "assistant" {
		t.Fatalf("alice's answer is now %s", m.raw)
	}
}
