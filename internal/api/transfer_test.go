package api_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// TestExportImportOverHTTP exports a conversation in each format, imports
// the JSONL export under a new id, and checks the answers' statuses, types
// and errors.
func TestExportImportOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.alice, map[string]any{"id": "m1", "parts": []any{map[string]any{"type": "text", "text": "hello"}}, "finality": "turn"}), 201, "")
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.bob, map[string]any{"id": "m2", "replyTo": "m1", "parts": []any{map[string]any{"type": "text", "text": "hi"}}, "finality": "turn"}), 201, "")

	for format, ctype := range map[string]string{"markdown": "text/markdown", "json": "application/json", "jsonl": "application/x-ndjson", "": "application/json"} {
		r := b.do("GET", "/v1/conversations/"+id+"/export?format="+format, b.viewer, nil)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("export %q: %d %v", format, r.status, r.header)
		}
	}
	md := b.do("GET", "/v1/conversations/"+id+"/export?format=markdown", b.viewer, nil)
	if !bytes.Contains(md.raw, []byte("**Agent: bob (message from alice)**")) || !bytes.Contains(md.raw, []byte("**Agent: bob (reply to alice)**")) {
		t.Fatalf("markdown:\n%s", md.raw)
	}
	b.want(b.do("GET", "/v1/conversations/"+id+"/export?format=pdf", b.viewer, nil), 422, "invalid_value")
	b.want(b.do("GET", "/v1/conversations/nope/export", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/"+id+"/export", "", nil), 401, "unauthorized")

	jsonl := b.do("GET", "/v1/conversations/"+id+"/export?format=jsonl", b.viewer, nil).raw
	b.want(b.do("POST", "/v1/conversations/import", b.alice, jsonl), 403, "forbidden")
	b.want(b.do("POST", "/v1/conversations/import", b.admin, jsonl), 409, "busy")
	b.want(b.do("POST", "/v1/conversations/import?id=bad%20id", b.admin, jsonl), 422, "invalid_value")
	b.want(b.do("POST", "/v1/conversations/import?id=copy", b.admin, jsonl[:len(jsonl)/2]), 400, "invalid_request")
	b.want(b.do("GET", "/v1/conversations/copy", b.viewer, nil), 404, "not_found")

	r := b.do("POST", "/v1/conversations/import?id=copy", b.admin, jsonl)
	b.want(r, 201, "")
	if r.body["source"] != "export" || r.body["messages"].(float64) != 2 {
		t.Fatalf("import answer: %s", r.raw)
	}
	again := b.do("GET", "/v1/conversations/copy/export?format=jsonl", b.viewer, nil).raw
	if !bytes.Equal(withoutEpoch(bytes.ReplaceAll(again, []byte(`"copy"`), []byte(`"`+id+`"`))), withoutEpoch(jsonl)) {
		t.Fatalf("the imported copy exports differently:\n%s\n%s", jsonl, again)
	}
	// The copy is live: bob may write in it.
	b.want(b.do("POST", "/v1/conversations/copy/messages", b.alice, map[string]any{"parts": []any{map[string]any{"type": "text", "text": "more"}}}), 201, "")
}

// TestImportBodyLimit answers 413 for an import over the configured size.
func TestImportBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{MaxImportBytes: 4096})
	row := `{"role":"user","sender":"HUMAN","content":"` + strings.Repeat("x", 100) + `"}` + "\n"
	rows := strings.Repeat(row, 100)
	b.want(b.do("POST", "/v1/conversations/import?id=big", b.admin, rows), 413, "too_large")
	b.want(b.do("GET", "/v1/conversations/big", b.viewer, nil), 404, "not_found")
	r := b.do("POST", "/v1/conversations/import?id=small&participants=a1,a2&title=Old", b.admin, strings.Repeat(row, 5))
	b.want(r, 201, "")
	if r.body["source"] != "legacy" || r.body["conversation"].(map[string]any)["title"] != "Old" {
		t.Fatalf("legacy import answer: %s", r.raw)
	}
}

// TestImportCutShortOverHTTP answers 400 for a JSON array of legacy rows
// that an upload cut short, and imports none of it.
func TestImportCutShortOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	row := `{"role":"user","sender":"HUMAN","content":"hello"}`
	for name, body := range map[string]string{"after a comma": "[" + row + ",", "after a row": "[" + row + "," + row, "followed by more": "[" + row + "] " + row} {
		b.want(b.do("POST", "/v1/conversations/import?id=cut", b.admin, body), 400, "invalid_request")
		if r := b.do("GET", "/v1/conversations/cut", b.viewer, nil); r.status != 404 {
			t.Fatalf("%s: the refused import left the conversation (%d)", name, r.status)
		}
	}
	b.want(b.do("POST", "/v1/conversations/import?id=cut", b.admin, "["+row+","+row+"]"), 201, "")
}

// TestImportNeitherExportNorRows answers 422 for a file that is neither a
// Parley export nor legacy message rows, and leaves no conversation.
func TestImportNeitherExportNorRows(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	row := `{"role":"user","sender":"HUMAN","content":"hello"}`
	for name, body := range map[string]string{
		"an object":             `{"garbage":1}`,
		"an array of objects":   `[{"garbage":1},{"more":2}]`,
		"lines of objects":      "{\"garbage\":1}\n{\"more\":2}\n",
		"an empty object":       `{}`,
		"rows, then no row":     row + "\n" + `{"garbage":1}` + "\n",
		"an export's other key": `{"export":"parley","version":1}`,
	} {
		r := b.do("POST", "/v1/conversations/import?id=junk", b.admin, body)
		b.want(r, 422, "invalid_value")
		if !strings.Contains(string(r.raw), "not a message row") {
			t.Fatalf("%s: the refusal does not say what is wrong: %s", name, r.raw)
		}
		if r := b.do("GET", "/v1/conversations/junk", b.viewer, nil); r.status != 404 {
			t.Fatalf("%s: the refused import left the conversation (%d)", name, r.status)
		}
		if r := b.do("GET", "/v1/conversations?limit=10", b.admin, nil); len(r.body["conversations"].([]any)) != 0 {
			t.Fatalf("%s: the refused import left a conversation: %s", name, r.raw)
		}
	}
}

var epochRE = regexp.MustCompile(`"epoch":"[^"]*"`)

func withoutEpoch(b []byte) []byte { return epochRE.ReplaceAll(b, []byte(`"epoch":"-"`)) }

// TestImportInvisibleUntilCommitted begins an import through the engine and
// writes a batch: until Commit no endpoint shows the conversation or lets
// anyone write to it, and its id is busy; after Commit it is an ordinary
// conversation; an aborted import leaves nothing.
func TestImportInvisibleUntilCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	begin := func(id string) *engine.Import {
		im, err := b.eng.BeginImport(b.ctx, parley.Conversation{ID: id, Participants: []string{"alice"}, TurnPolicy: parley.PolicyFree, CreatedAt: parley.NewTime(time.Now())})
		if err != nil {
			t.Fatal(err)
		}
		trace := parley.Event{Seq: 2, Type: parley.EventTrace, Turn: 1, AgentID: "alice", Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: []byte(`{}`)}
		m := &parley.Message{ID: "m1", Seq: 2, Role: parley.RoleUser, AgentID: "alice", Content: "hi", Parts: []parley.Part{{Type: parley.PartText, Text: "hi"}},
			Status: parley.StatusComplete, Finality: parley.FinalityNone}
		if err := im.Append(b.ctx, []parley.Event{trace}, []*parley.Message{m}); err != nil {
			t.Fatal(err)
		}
		return im
	}
	im := begin("imp")
	path := "/v1/conversations/imp"
	for _, p := range []string{"", "/events", "/messages", "/messages/m1", "/messages/m1/replies", "/messages/m1/thread", "/prompts", "/export", "/stream"} {
		b.want(b.do("GET", path+p, b.viewer, nil), 404, "not_found")
	}
	if status, _ := b.dialError(path + "/ws"); status != 404 {
		t.Fatalf("WebSocket to an import in progress: %d, want 404", status)
	}
	if status, _ := b.dialError(path+"/runner?agentId=alice", "Authorization", "Bearer "+b.admin); status != 404 {
		t.Fatalf("runner to an import in progress: %d, want 404", status)
	}
	if listedIDs(b)["imp"] {
		t.Fatal("an import in progress is listed")
	}
	b.want(b.do("POST", path+"/messages", b.alice, map[string]any{"content": "early"}), 404, "not_found")
	b.want(b.do("DELETE", path, b.admin, nil), 404, "not_found")
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": "imp"})
	b.want(r, 409, "busy")
	if !strings.Contains(string(r.raw), "import of conversation imp is in progress") {
		t.Fatalf("creating over an import in progress: %s", r.raw)
	}
	if _, err := b.eng.BeginImport(b.ctx, parley.Conversation{ID: "imp", CreatedAt: parley.NewTime(time.Now())}); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("a second import of the same id: %v, want busy", err)
	}

	if err := im.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if b.lastSeq("imp") != 2 || !listedIDs(b)["imp"] {
		t.Fatal("a committed import is not visible")
	}
	b.want(b.do("GET", path+"/messages/m1/thread", b.viewer, nil), 200, "")
	b.want(b.do("POST", path+"/messages", b.alice, map[string]any{"content": "now"}), 201, "")

	gone := begin("gone")
	if err := gone.Abort(); err != nil {
		t.Fatal(err)
	}
	evs, err := b.db.ReadEvents(b.ctx, store.ReadEventsParams{ConversationID: "gone", Limit: 10})
	if err != nil || len(evs) != 0 {
		t.Fatalf("an aborted import left %d events (%v)", len(evs), err)
	}
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": "gone"}), 201, "")
}

// listedIDs returns the ids of the first page of conversations.
func listedIDs(b *bundle) map[string]bool {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations?limit=1000", b.viewer, nil)
	b.want(r, 200, "")
	ids := map[string]bool{}
	for _, v := range r.body["conversations"].([]any) {
		ids[v.(map[string]any)["conversation"].(map[string]any)["id"].(string)] = true
	}
	return ids
}
