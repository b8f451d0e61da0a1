package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// Input requests through the chat protocols: the AI SDK's approvals and
// AG-UI's interrupts, and what they refuse.

// inputFixture is a conversation made for a chat of alice's, answered by
// bob's runner, with carol a member who did not ask.
type inputFixture struct {
	*bundle
	id, carol string
	run       *websocket.Conn
}

func newInputFixture(t *testing.T, id string) *inputFixture {
	t.Helper()
	b := setup(t, engine.Options{}, api.Options{})
	r := b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "agent", "agentId": "carol"})
	b.want(r, 201, "")
	carol := r.body["token"].(string)
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": id, "participants": []string{"bob"}, "members": []string{"alice", "carol"}}), 201, "")
	return &inputFixture{bundle: b, id: id, carol: carol, run: b.runnerConn(id, b.bob)}
}

// ask has bob's runner, given the prompt, write text, a call and an
// approval of it (request req) as message r1.
func (f *inputFixture) ask(t *testing.T, reqs ...string) {
	t.Helper()
	until(t, f.bundle, f.run, "prompt")
	do(t, f.bundle, f.run, `{"type":"message.create","turnId":"r1"}`)
	do(t, f.bundle, f.run, `{"type":"message.part.text-delta","turnId":"r1","delta":"Cleaning. "}`)
	do(t, f.bundle, f.run, `{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"bash","status":"pending","args":{"command":"rm -rf build"}}`)
	for _, req := range reqs {
		kind, call := "approval", `,"toolCallId":"c1","toolName":"bash","expiresAt":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"`
		if strings.HasPrefix(req, "q") {
			kind, call = "question", `,"options":[{"label":"A"},{"label":"B"}]`
		}
		do(t, f.bundle, f.run, fmt.Sprintf(`{"type":"message.part.input-request","turnId":"r1","requestId":%q,"kind":%q,"title":"May I?"%s}`, req, kind, call))
	}
}

// finish has the runner take the outcome of req, complete the call and
// end the answer.
func (f *inputFixture) finish(t *testing.T, reqs ...string) {
	t.Helper()
	for _, req := range reqs {
		if got := until(t, f.bundle, f.run, "input.answered"); got["requestId"] != req {
			t.Fatalf("runner got %v, want the outcome of %s", got, req)
		}
		do(t, f.bundle, f.run, `{"type":"input.ack","requestId":"`+req+`"}`)
	}
	do(t, f.bundle, f.run, `{"type":"message.part.tool-update","turnId":"r1","callId":"c1","status":"completed","result":"ok"}`)
	do(t, f.bundle, f.run, `{"type":"message.part.text-delta","turnId":"r1","delta":"Done."}`)
	do(t, f.bundle, f.run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	do(t, f.bundle, f.run, `{"type":"complete"}`)
}

// approvalBody is the POST /v1/chat of useChat after addToolApprovalResponse.
func approvalBody(chat, req, approved string) map[string]any {
	return map[string]any{"id": chat, "trigger": "submit-message", "messageId": "r1", "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "Clean"}}},
		map[string]any{"id": "r1", "role": "assistant", "parts": []any{
			map[string]any{"type": "text", "text": "Cleaning. "},
			map[string]any{"type": "tool-bash", "toolCallId": "c1", "state": "approval-responded", "input": map[string]any{"command": "rm -rf build"},
				"approval": map[string]any{"id": req, "approved": approved == "true", "reason": "ok"}},
		}},
	}}
}

// inputStatus is request req's status, as message r1 holds it.
func (f *inputFixture) inputStatus(t *testing.T, req string) string {
	t.Helper()
	r := f.do("GET", "/v1/conversations/"+f.id+"/messages/r1", f.alice, nil)
	f.want(r, 200, "")
	for _, p := range r.body["parts"].([]any) {
		if m := p.(map[string]any); m["requestId"] == req {
			return m["status"].(string)
		}
	}
	t.Fatalf("no request %s in %s", req, r.raw)
	return ""
}

const wantPaused = `start messageId="r1"
text-start id="t0"
text-delta id="t0" delta="Cleaning. "
text-end id="t0"
tool-input-start id=... toolCallId="c1" toolName="bash" providerExecuted=true
tool-input-available toolCallId="c1" toolName="bash" input={"command":"rm -rf build"} providerExecuted=true
data-input-request id="req-1"
tool-approval-request toolCallId="c1"
finish
[DONE]`

// TestChatApprovalPausesAndGoesOn: an approval of a tool call pauses the
// UI message stream (a resume shows it once, and pauses too); only the
// asker may answer it through the chat; the answer goes on with the same
// message; and the approval sent again streams the same rest.
func TestChatApprovalPausesAndGoesOn(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "chat-a")
	st := events(t, f.postJSON("/v1/chat", f.alice, chatBody("chat-a", "u1", "Clean", "to", "bob")))
	f.ask(t, "req-1")
	if got := uiStream(st.all()); got != wantPaused {
		t.Fatalf("paused stream:\n%s\nwant:\n%s", got, wantPaused)
	}
	if got := uiStream(events(t, f.send("GET", "/v1/chat/chat-a/stream", f.alice, nil)).all()); got != wantPaused {
		t.Fatalf("resumed stream:\n%s\nwant:\n%s", got, wantPaused)
	}
	for who, tok := range map[string]string{"carol": f.carol, "bob (who asked)": f.bob} {
		if r := asResponse(f.postJSON("/v1/chat", tok, approvalBody("chat-a", "req-1", "true"))); r.status != 403 || r.body["error"].(map[string]any)["code"] != "forbidden" {
			t.Fatalf("%s approves: %d %s", who, r.status, r.raw)
		}
	}
	if s := f.inputStatus(t, "req-1"); s != "pending" {
		t.Fatalf("after refusals the request is %s", s)
	}
	st = events(t, f.postJSON("/v1/chat", f.alice, approvalBody("chat-a", "req-1", "true")))
	f.finish(t, "req-1")
	const wantRest = `start messageId="r1"
data-input-request id="req-1"
tool-output-available toolCallId="c1" output="ok" providerExecuted=true
text-start id="t3"
text-delta id="t3" delta="Done."
text-end id="t3"
finish
[DONE]`
	if got := uiStream(st.all()); got != wantRest {
		t.Fatalf("the rest:\n%s\nwant:\n%s", got, wantRest)
	}
	if got := uiStream(events(t, f.postJSON("/v1/chat", f.alice, approvalBody("chat-a", "req-1", "true"))).all()); got != wantRest {
		t.Fatalf("the approval sent again:\n%s", got)
	}
	if r := asResponse(f.postJSON("/v1/chat", f.alice, approvalBody("chat-a", "req-1", "false"))); r.status != 409 {
		t.Fatalf("another answer after: %d %s", r.status, r.raw)
	}
}

// TestChatQuestionIsNoApproval: a question is a data part that does not
// pause the stream, and an approval answer naming it is refused.
func TestChatQuestionIsNoApproval(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "chat-q")
	st := events(t, f.postJSON("/v1/chat", f.alice, chatBody("chat-q", "u1", "Clean", "to", "bob")))
	f.ask(t, "q-1")
	if r := asResponse(f.postJSON("/v1/chat", f.alice, approvalBody("chat-q", "q-1", "true"))); r.status != 422 || !strings.Contains(string(r.raw), "not an approval") {
		t.Fatalf("an approval of a question: %d %s", r.status, r.raw)
	}
	f.want(f.do("POST", "/v1/conversations/chat-q/inputs/q-1", f.alice, map[string]any{"answer": map[string]any{"choices": []string{"B"}}}), 200, "")
	f.finish(t, "q-1")
	got := chunkTypes(st.all(), "id")
	if !strings.Contains(got, "data-input-request id=\"q-1\"\ndata-input-request id=\"q-1\"\ntool-output-available") || strings.Contains(got, "tool-approval-request") {
		t.Fatalf("stream:\n%s", got)
	}
}

// resumeInput is a RunAgentInput that answers interrupts.
func resumeInput(thread, run string, entries ...map[string]any) map[string]any {
	in := runInput(thread, run, "ignored", map[string]any{"to": "bob"})
	in["resume"] = entries
	return in
}

// TestAGUIInterruptAndResume: a run whose answer waits on input requests
// finishes with an interrupt outcome listing them; a resume must answer
// every one (and may not cancel a question), refusing otherwise with
// nothing answered, and may not be a stranger's; one that does goes on
// with the same answer, and sent again streams the same.
func TestAGUIInterruptAndResume(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "t-i")
	st := events(t, f.postJSON("/v1/ag-ui", f.alice, runInput("t-i", "run-1", "Clean", map[string]any{"to": "bob"})))
	f.ask(t, "req-1", "q-1")
	evs := st.all()
	last := evs[len(evs)-1].data
	for _, want := range []string{`"type":"RUN_FINISHED"`, `"runId":"run-1"`, `"type":"interrupt"`, `"id":"req-1"`, `"reason":"tool_approval"`, `"toolCallId":"c1"`, `"responseSchema"`, `"expiresAt":"20`} {
		if !strings.Contains(last, want) || strings.Contains(last, `"id":"q-1"`) {
			t.Fatalf("the run ended with %s; want it to hold %s, and not the question asked after", last, want)
		}
	}
	yes := map[string]any{"interruptId": "req-1", "status": "resolved", "payload": map[string]any{"approved": true}}
	blue := map[string]any{"interruptId": "q-1", "status": "resolved", "payload": map[string]any{"choices": []string{"A"}}}
	for _, c := range []struct {
		name   string
		token  string
		in     map[string]any
		status int
		holds  string
	}{
		{"the later of two answered", f.alice, resumeInput("t-i", "run-2", blue), 422, "leaves out req-1"},
		{"a question cancelled", f.alice, resumeInput("t-i", "run-2", yes, map[string]any{"interruptId": "q-1", "status": "cancelled"}), 422, "question"},
		{"an answer the schema refuses", f.alice, resumeInput("t-i", "run-2", yes, map[string]any{"interruptId": "q-1", "status": "resolved", "payload": map[string]any{"choices": []string{"C"}}}), 422, ""},
		{"a stranger answers", f.carol, resumeInput("t-i", "run-2", yes, blue), 403, ""},
	} {
		if r := asResponse(f.postJSON("/v1/ag-ui", c.token, c.in)); r.status != c.status || !strings.Contains(string(r.raw), c.holds) {
			t.Fatalf("%s: %d %s", c.name, r.status, r.raw)
		}
		if s := f.inputStatus(t, "req-1"); s != "pending" {
			t.Fatalf("%s: req-1 is %s after: a refused resume answers nothing", c.name, s)
		}
	}
	st = events(t, f.postJSON("/v1/ag-ui", f.alice, resumeInput("t-i", "run-2", yes, blue)))
	f.finish(t, "req-1", "q-1")
	const wantRest = `RUN_STARTED threadId="t-i" runId="run-2"
TOOL_CALL_RESULT messageId="r1:c1" toolCallId="c1" content="\"ok\""
TEXT_MESSAGE_START messageId="r1"
TEXT_MESSAGE_CONTENT messageId="r1" delta="Done."
TEXT_MESSAGE_END messageId="r1"
RUN_FINISHED threadId="t-i" runId="run-2"`
	if got := aguiTypes(st.all()); got != wantRest {
		t.Fatalf("the resumed run:\n%s\nwant:\n%s", got, wantRest)
	}
	if got := aguiTypes(events(t, f.postJSON("/v1/ag-ui", f.alice, resumeInput("t-i", "run-2", yes, blue))).all()); got != wantRest {
		t.Fatalf("the resume sent again:\n%s", got)
	}
}

// TestChatApprovalAnsweredElsewhere: an approval answered over the HTTP API
// while the chat's stream is paused does not pause the stream a reload
// resumes: it shows the approval and its answer once, and goes on live.
func TestChatApprovalAnsweredElsewhere(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "chat-e")
	st := events(t, f.postJSON("/v1/chat", f.alice, chatBody("chat-e", "u1", "Clean", "to", "bob")))
	f.ask(t, "req-1")
	if got := uiStream(st.all()); got != wantPaused {
		t.Fatalf("paused stream:\n%s", got)
	}
	f.want(f.do("POST", "/v1/conversations/chat-e/inputs/req-1", f.alice, map[string]any{"answer": map[string]any{"approved": true}}), 200, "")
	st = events(t, f.send("GET", "/v1/chat/chat-e/stream", f.alice, nil))
	f.finish(t, "req-1")
	want := strings.TrimSuffix(wantPaused, "finish\n[DONE]") + `data-input-request id="req-1"
tool-output-available toolCallId="c1" output="ok" providerExecuted=true
text-start id="t3"
text-delta id="t3" delta="Done."
text-end id="t3"
finish
[DONE]`
	if got := uiStream(st.all()); got != want {
		t.Fatalf("resumed stream:\n%s\nwant:\n%s", got, want)
	}
}

// TestChatApprovalExpires: an approval that expires while the stream is
// paused is a denial: a resumed stream shows it ended and the call
// output-denied, and an approval sent after is refused.
func TestChatApprovalExpires(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "chat-x")
	st := events(t, f.postJSON("/v1/chat", f.alice, chatBody("chat-x", "u1", "Clean", "to", "bob")))
	until(t, f.bundle, f.run, "prompt")
	do(t, f.bundle, f.run, `{"type":"message.create","turnId":"r1"}`)
	do(t, f.bundle, f.run, `{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"bash","status":"pending","args":{}}`)
	soon := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	do(t, f.bundle, f.run, `{"type":"message.part.input-request","turnId":"r1","requestId":"req-1","kind":"approval","toolCallId":"c1","title":"May I?","expiresAt":"`+soon+`"}`)
	if got := chunkTypes(st.all()); !strings.HasSuffix(got, "tool-approval-request\nfinish\n[DONE]") {
		t.Fatalf("paused stream:\n%s", got)
	}
	if got := until(t, f.bundle, f.run, "input.answered"); got["status"] != "expired" {
		t.Fatalf("runner got %v", got)
	}
	if r := asResponse(f.postJSON("/v1/chat", f.alice, approvalBody("chat-x", "req-1", "true"))); r.status != 409 {
		t.Fatalf("an approval after it expired: %d %s", r.status, r.raw)
	}
	st = events(t, f.send("GET", "/v1/chat/chat-x/stream", f.alice, nil))
	do(t, f.bundle, f.run, `{"type":"input.ack","requestId":"req-1"}`)
	do(t, f.bundle, f.run, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`)
	do(t, f.bundle, f.run, `{"type":"complete"}`)
	const want = `start
tool-input-start
tool-input-available
data-input-request status="pending"
tool-approval-request
data-input-request status="expired"
tool-output-denied
finish
[DONE]`
	var got []string
	for _, ev := range st.all() {
		var c struct {
			Type string `json:"type"`
			Data struct {
				Status string `json:"status"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(ev.data), &c) != nil {
			got = append(got, ev.data)
			continue
		}
		if c.Data.Status != "" {
			c.Type += ` status="` + c.Data.Status + `"`
		}
		got = append(got, c.Type)
	}
	if strings.Join(got, "\n") != want {
		t.Fatalf("resumed stream:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}

// TestChatTwoApprovalsInARow: approvals asked in a row pause the stream
// one at a time; the second round's post still carries the first
// approval (its call has no outcome yet), which is no error.
func TestChatTwoApprovalsInARow(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "chat-2")
	st := events(t, f.postJSON("/v1/chat", f.alice, chatBody("chat-2", "u1", "Clean", "to", "bob")))
	f.ask(t, "req-1", "req-2")
	if got := chunkTypes(st.all(), "approvalId"); !strings.HasSuffix(got, `tool-approval-request approvalId="req-1"`+"\nfinish\n[DONE]") {
		t.Fatalf("first stream:\n%s", got)
	}
	first := approvalBody("chat-2", "req-1", "true")
	got := chunkTypes(events(t, f.postJSON("/v1/chat", f.alice, first)).all(), "approvalId", "id")
	// The second was asked before the first was answered: it pauses the
	// stream first, and the first's answer follows in the next.
	if want := "start\ndata-input-request id=\"req-2\"\ntool-approval-request approvalId=\"req-2\"\nfinish\n[DONE]"; got != want {
		t.Fatalf("second stream:\n%s\nwant:\n%s", got, want)
	}
	both := approvalBody("chat-2", "req-1", "true")
	parts := both["messages"].([]any)[1].(map[string]any)
	parts["parts"] = append(parts["parts"].([]any), map[string]any{"type": "tool-bash", "toolCallId": "c1", "state": "approval-responded",
		"approval": map[string]any{"id": "req-2", "approved": true}})
	st = events(t, f.postJSON("/v1/chat", f.alice, both))
	f.finish(t, "req-1", "req-2")
	if got := chunkTypes(st.all(), "id"); !strings.HasPrefix(got, "start\ndata-input-request id=\"req-1\"\ndata-input-request id=\"req-2\"\ntool-output-available") || !strings.HasSuffix(got, "finish\n[DONE]") {
		t.Fatalf("third stream:\n%s", got)
	}
}
