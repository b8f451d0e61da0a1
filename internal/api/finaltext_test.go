package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestFinalTextAgreesWithParts: a message's content is always the text of
// its parts. A finalText that goes on past the streamed text adds the rest
// as text; one that does not start with the streamed text (shorter, or
// another text) is refused with 422 and the message goes on streaming,
// unchanged.
func TestFinalTextAgreesWithParts(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	c := b.runnerConn(id, b.alice)
	for _, f := range []string{
		`{"type":"message.create","turnId":"r1"}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"Let me check. "}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"search","status":"completed","result":"found"}`,
	} {
		if ack := send(t, b, c, f); ack["type"] != "ack" {
			t.Fatalf("%s answered %v", f, ack)
		}
	}
	for _, bad := range []string{"Let me", "Something else entirely, and longer than the text"} {
		ack := send(t, b, c, `{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"`+bad+`"}`)
		if ack["type"] != "error" || !strings.Contains(fmt.Sprint(ack), "invalid_value") || !strings.Contains(fmt.Sprint(ack), "start with") {
			t.Fatalf("finalText %q answered %v, want an invalid_value error", bad, ack)
		}
		r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
		if b.want(r, 200, ""); r.body["status"] != "streaming" {
			t.Fatalf("a refused finalize changed the message: %s", r.raw)
		}
	}
	if ack := send(t, b, c, `{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"Let me check. Found it."}`); ack["type"] != "ack" {
		t.Fatalf("finalize answered %v", ack)
	}
	r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
	b.want(r, 200, "")
	var kinds, texts []string
	for _, p := range r.body["parts"].([]any) {
		p := p.(map[string]any)
		kinds = append(kinds, p["type"].(string))
		if p["type"] == "text" {
			texts = append(texts, p["text"].(string))
		}
	}
	if strings.Join(kinds, ",") != "text,tool-call,text,finish" || strings.Join(texts, "") != "Let me check. Found it." || r.body["content"] != "Let me check. Found it." {
		t.Fatalf("message = %s", r.raw)
	}
}
