package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
)

// TestV1RunnerFrames: a runner that speaks the first protocol (stream,
// result, tool, complete) answers a prompt in a conversation made with
// messageFormat v1. Its streamed text goes out as chunks that name no
// message; each result is one assistant row, each tool call a tool row
// made and updated by its callId, all in the runner's turn, replying to
// the prompt; complete closes the turn and ends the prompt, so the next
// prompt is dispatched; the export has the rows. A v2 conversation refuses
// the v1 frames, and writes nothing.
func TestV1RunnerFrames(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"alice"}, "members": []string{"human"}, "messageFormat": "v1"})
	b.want(r, 201, "")
	id := r.body["conversation"].(map[string]any)["id"].(string)
	watch := b.dialWS(id, "")
	readFrame(t, b.ctx, watch) // init
	run := b.runnerConn(id, b.alice)
	b.prompt(id, "p1", "")
	b.prompt(id, "p2", "")
	if f := readFrame(t, b.ctx, run); f["type"] != "prompt" || f["messageId"] != "p1" || f["messageFormat"] != "v1" {
		t.Fatalf("the runner got %v, want prompt p1 in format v1", f)
	}
	for _, frame := range []string{
		`{"type":"stream","content":"Let me "}`,
		`{"type":"stream","content":"look."}`,
		`{"type":"result","content":"Let me look."}`,
		`{"type":"tool","callId":"c1","toolName":"search","status":"running","args":{"q":"x"}}`,
		`{"type":"tool","callId":"c1","toolName":"search","status":"completed","result":"found"}`,
		`{"type":"stream","content":"Found"}`,
		`{"type":"result","content":"Found it."}`,
		`{"type":"complete"}`,
	} {
		if f := send(t, b, run, frame); f["type"] != "ack" {
			t.Fatalf("%s answered %v", frame, f)
		}
	}
	// The next prompt goes to the runner: complete closed the turn.
	if f := readFrame(t, b.ctx, run); f["type"] != "prompt" || f["messageId"] != "p2" {
		t.Fatalf("after complete the runner got %v, want prompt p2", f)
	}

	// The rows: p1, two results and the tool row, in one turn, replying to p1.
	r = b.do("GET", "/v1/conversations/"+id+"/messages?limit=100", b.viewer, nil)
	b.want(r, 200, "")
	var rows []string
	for _, m := range r.body["messages"].([]any) {
		m := m.(map[string]any)
		row := fmt.Sprintf("%s:%s:%v:%s", m["role"], m["status"], m["content"], m["finality"])
		if m["role"] != "user" {
			if m["replyTo"] != "p1" || m["turnId"] != "p1" || m["agentId"] != "alice" {
				t.Errorf("row %s: replyTo %v turnId %v agent %v", row, m["replyTo"], m["turnId"], m["agentId"])
			}
		}
		if m["role"] == "tool" {
			call := m["parts"].([]any)[0].(map[string]any)
			if m["id"] != "tool-c1" || call["callId"] != "c1" || call["status"] != "completed" || call["result"] != "found" {
				t.Errorf("the tool row: %v", m)
			}
		}
		rows = append(rows, row)
	}
	want := "user:complete:q p1:turn|assistant:complete:Let me look.:none|tool:complete::none|assistant:complete:Found it.:turn|user:complete:about p2:turn"
	if strings.Join(rows, "|") != strings.ReplaceAll(want, "q p1", "about p1") {
		t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(rows, "|"), strings.ReplaceAll(want, "q p1", "about p1"))
	}

	// The streamed text went out as chunks naming no message.
	var streamed []string
	for len(streamed) < 3 {
		f := readFrame(t, b.ctx, watch)
		if f["type"] != "chunk" {
			continue
		}
		if d := f["data"].(map[string]any); d["messageId"] == "" || d["messageId"] == nil {
			streamed = append(streamed, d["content"].(string))
		}
	}
	if strings.Join(streamed, "|") != "Let me |look.|Found" {
		t.Fatalf("chunks without a message: %q", streamed)
	}

	md := b.do("GET", "/v1/conversations/"+id+"/export?format=markdown", b.viewer, nil)
	for _, s := range []string{"Let me look.", "Found it.", "search"} {
		if !strings.Contains(string(md.raw), s) {
			t.Errorf("the Markdown export lacks %q:\n%s", s, md.raw)
		}
	}

	// A v2 conversation refuses v1 frames.
	v2 := b.conversation("alice")
	before := b.log(v2)
	c := b.runnerConn(v2, b.alice)
	for _, frame := range []string{`{"type":"stream","content":"x"}`, `{"type":"result","content":"x"}`, `{"type":"tool","callId":"c","toolName":"t","status":"running"}`} {
		if f := send(t, b, c, frame); f["type"] != "error" || f["error"].(map[string]any)["code"] != "invalid_value" {
			t.Errorf("%s in a v2 conversation: %v", frame, f)
		}
	}
	if after := b.log(v2); after != before {
		t.Fatal("a refused v1 frame wrote into a v2 conversation")
	}
}
