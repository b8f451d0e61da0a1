package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
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
	id := b.conversationV1()
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
	r := b.do("GET", "/v1/conversations/"+id+"/messages?limit=100", b.viewer, nil)
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

// conversationV1 makes a conversation with messageFormat v1 for alice,
// with the person "human" as a member.
func (b *bundle) conversationV1() string {
	b.t.Helper()
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"alice"}, "members": []string{"human"}, "messageFormat": "v1"})
	b.want(r, 201, "")
	return r.body["conversation"].(map[string]any)["id"].(string)
}

// TestV1ConversationThreadAndExport: the rows a runner of the first
// protocol writes are a thread under the prompt they answer (GET …/thread
// from either end), and the JSON and JSON Lines exports hold them and the
// streamed text (the chunks that name no message, in the log), mid-answer
// and after; an import of the export is the same conversation, still v1.
func TestV1ConversationThreadAndExport(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversationV1()
	run := b.runnerConn(id, b.alice)
	b.prompt(id, "p1", "")
	if f := readFrame(t, b.ctx, run); f["type"] != "prompt" {
		t.Fatalf("the runner got %v, want its prompt", f)
	}
	answer := func(frames ...string) {
		t.Helper()
		for _, frame := range frames {
			if f := send(t, b, run, frame); f["type"] != "ack" {
				t.Fatalf("%s answered %v", frame, f)
			}
		}
	}
	answer(`{"type":"stream","content":"Let me "}`, `{"type":"stream","content":"look."}`, `{"type":"result","content":"Let me look."}`,
		`{"type":"tool","callId":"c1","toolName":"search","status":"running","args":{"q":"x"}}`,
		`{"type":"tool","callId":"c1","toolName":"search","status":"completed","result":"found"}`,
		`{"type":"stream","content":"Found"}`)

	// Mid-answer: the text streamed after the last row is in the log only.
	mid := exportV1(t, b, id)
	if got := strings.Join(mid.streamed, "|"); got != "Let me |look.|Found" {
		t.Fatalf("mid-answer, the export's chunks that name no message: %q", got)
	}
	if got := strings.Join(mid.rows, "|"); got != "p1 user about p1|assistant Let me look.|tool-c1 tool " {
		t.Fatalf("mid-answer, the export's rows: %q", got)
	}

	answer(`{"type":"result","content":"Found it."}`, `{"type":"complete"}`)
	done := exportV1(t, b, id)
	if got := strings.Join(done.rows, "|"); got != "p1 user about p1|assistant Let me look.|tool-c1 tool |assistant Found it." {
		t.Fatalf("the export's rows: %q", got)
	}
	if len(done.streamed) != 3 || done.format != "v1" {
		t.Fatalf("the export: streamed %q, messageFormat %q", done.streamed, done.format)
	}

	// The thread of the last row: p1 is its root and only ancestor; p1's
	// thread has the three rows as its descendants, each at depth 1.
	last := done.ids[len(done.ids)-1]
	r := b.do("GET", "/v1/conversations/"+id+"/messages/"+last+"/thread", b.viewer, nil)
	b.want(r, 200, "")
	if got := threadIDs(r.body["ancestors"]); got != "p1:0" || r.body["root"].(map[string]any)["id"] != "p1" ||
		r.body["message"].(map[string]any)["content"] != "Found it." || r.body["message"].(map[string]any)["depth"] != float64(1) {
		t.Fatalf("the thread of %s: ancestors %s, %v", last, got, r.body)
	}
	r = b.do("GET", "/v1/conversations/"+id+"/messages/p1/thread", b.viewer, nil)
	b.want(r, 200, "")
	want := strings.Join([]string{done.ids[1] + ":1", "tool-c1:1", last + ":1"}, " ")
	if got := threadIDs(r.body["descendants"]); got != want || r.body["truncated"] != false {
		t.Fatalf("the thread of p1: descendants %s (truncated %v), want %s", got, r.body["truncated"], want)
	}

	// An import of the export is the same conversation, still v1.
	r = b.do("POST", "/v1/conversations/import?id=v1-copy", b.admin, done.jsonl)
	b.want(r, 201, "")
	copied := exportV1(t, b, "v1-copy")
	if strings.Join(copied.rows, "|") != strings.Join(done.rows, "|") || strings.Join(copied.streamed, "|") != strings.Join(done.streamed, "|") || copied.format != "v1" {
		t.Fatalf("the import: rows %q streamed %q format %q", copied.rows, copied.streamed, copied.format)
	}
}

// v1Export is what a test reads of a conversation's JSON and JSON Lines
// exports, which must agree.
type v1Export struct {
	format   string   // the conversation's messageFormat
	streamed []string // the contents of the chunks that name no message
	rows     []string // "id role content" per row (the id only for p1 and tool rows)
	ids      []string
	jsonl    []byte
}

// exportV1 reads both machine exports of conversation id and checks they
// hold the same conversation, events and rows.
func exportV1(t *testing.T, b *bundle, id string) v1Export {
	t.Helper()
	j := b.do("GET", "/v1/conversations/"+id+"/export?format=json", b.viewer, nil)
	b.want(j, 200, "")
	l := b.do("GET", "/v1/conversations/"+id+"/export?format=jsonl", b.viewer, nil)
	b.want(l, 200, "")
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(l.raw)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("a line of the JSON Lines export: %v: %s", err, line)
		}
		lines = append(lines, v)
	}
	var events, messages []any
	for _, v := range lines[1:] {
		if e, ok := v["event"]; ok {
			events = append(events, e)
		} else {
			messages = append(messages, v["message"])
		}
	}
	same := func(a, b any) bool { x, _ := json.Marshal(a); y, _ := json.Marshal(b); return string(x) == string(y) }
	if !same(lines[0]["conversation"], j.body["conversation"]) || !same(events, j.body["events"]) || !same(messages, j.body["messages"]) {
		t.Fatalf("the JSON Lines export differs from the JSON one:\n%s\n%s", l.raw, j.raw)
	}
	out := v1Export{format: j.body["conversation"].(map[string]any)["messageFormat"].(string), jsonl: l.raw}
	for _, v := range events {
		e := v.(map[string]any)
		if d, _ := e["data"].(map[string]any); e["type"] == "chunk" && d["messageId"] == "" {
			out.streamed = append(out.streamed, d["content"].(string))
		}
	}
	for _, v := range messages {
		m := v.(map[string]any)
		row := fmt.Sprintf("%s %s", m["role"], m["content"])
		if mid := m["id"].(string); mid == "p1" || m["role"] == "tool" {
			row = mid + " " + row
		}
		out.rows = append(out.rows, row)
		out.ids = append(out.ids, m["id"].(string))
	}
	return out
}

// threadIDs renders the messages of a thread's list as "id:depth" each.
func threadIDs(list any) string {
	var out []string
	for _, v := range list.([]any) {
		m := v.(map[string]any)
		out = append(out, fmt.Sprintf("%s:%v", m["id"], m["depth"]))
	}
	return strings.Join(out, " ")
}
