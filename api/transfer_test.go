package api_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
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

var epochRE = regexp.MustCompile(`"epoch":"[^"]*"`)

func withoutEpoch(b []byte) []byte { return epochRE.ReplaceAll(b, []byte(`"epoch":"-"`)) }
