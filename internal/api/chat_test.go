package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// sseData is an event stream of the chat protocols read as it comes: each
// event's id (if any) and data.
type sseData struct {
	resp *http.Response
	sc   *bufio.Scanner
	// statuses are the prompt status frames read (a chat's
	// data-parley-status, AG-UI's CUSTOM parley.status): not part of the
	// answer, next leaves them out of what it returns unless withStatus.
	statuses   []string
	withStatus bool
}

// chatEvent is one event of an sseData stream.
type chatEvent struct{ id, data string }

// post sends a JSON body and returns the response, whatever its status.
func (b *bundle) postJSON(path, token string, body any, header ...string) *http.Response {
	b.t.Helper()
	data, _ := json.Marshal(body)
	return b.send("POST", path, token, data, header...)
}

func (b *bundle) send(method, path, token string, body []byte, header ...string) *http.Response {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, method, b.url+path, bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads resp as an event stream; it fails the test unless resp is
// a 200 event stream.
func events(t *testing.T, resp *http.Response) *sseData {
	t.Helper()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("got %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b.String())
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	return &sseData{resp: resp, sc: sc}
}

// isStatusFrame reports whether an event's data is a prompt status frame.
func isStatusFrame(data string) bool {
	return strings.HasPrefix(data, `{"data":`) && strings.Contains(data, `"type":"data-parley-status"`) ||
		strings.HasPrefix(data, `{"name":"parley.status"`)
}

// next returns the next event (comments and prompt status frames
// skipped), or ok false at the end.
func (s *sseData) next() (ev chatEvent, ok bool) {
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if isStatusFrame(ev.data) && !s.withStatus {
				s.statuses = append(s.statuses, ev.data)
				ev = chatEvent{}
				continue
			}
			if ev.data != "" {
				return ev, true
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
	return ev, false
}

// all reads every event until the stream ends.
func (s *sseData) all() []chatEvent {
	var out []chatEvent
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// chunkTypes lists each event's type field, or the data itself when it is
// not JSON ([DONE]); with fields, also the fields named, as type:value.
func chunkTypes(evs []chatEvent, fields ...string) string {
	var out []string
	for _, ev := range evs {
		var c map[string]any
		if json.Unmarshal([]byte(ev.data), &c) != nil {
			out = append(out, ev.data)
			continue
		}
		s, _ := c["type"].(string)
		for _, f := range fields {
			if v, ok := c[f]; ok {
				b, _ := json.Marshal(v)
				s += " " + f + "=" + string(b)
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// chatBody is what DefaultChatTransport posts for one question.
func chatBody(chat, userID, text string, extra ...any) map[string]any {
	body := map[string]any{"id": chat, "trigger": "submit-message",
		"messages": []any{map[string]any{"id": userID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}}}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return body
}

// scriptedAnswer is what the tests' runner streams for a prompt: text, a
// tool call that completes, more text.
var scriptedAnswer = []string{
	`{"type":"message.create","turnId":"%s"}`,
	`{"type":"message.part.text-delta","turnId":"%s","delta":"Let me "}`,
	`{"type":"message.part.text-delta","turnId":"%s","delta":"look."}`,
	`{"type":"message.part.tool-update","turnId":"%s","callId":"c1","toolName":"search","status":"running","args":{"q":"6x7"}}`,
	`{"type":"message.part.tool-update","turnId":"%s","callId":"c1","toolName":"search","status":"completed","result":{"hits":1}}`,
	`{"type":"message.part.text-delta","turnId":"%s","delta":"It is 42."}`,
	`{"type":"message.finalize","turnId":"%s","reason":"end_turn"}`,
}

// script streams frames of scriptedAnswer (from..to) as message id.
func script(t *testing.T, b *bundle, run *websocket.Conn, id string, from, to int) {
	t.Helper()
	for _, f := range scriptedAnswer[from:to] {
		do(t, b, run, strings.ReplaceAll(f, "%s", id))
	}
}

// wantUIStream is the UI message stream of the scripted answer r1.
const wantUIStream = `start messageId="r1"
text-start id="t0"
text-delta id="t0" delta="Let me "
text-delta id="t0" delta="look."
text-end id="t0"
tool-input-start id=... toolCallId="c1" toolName="search" providerExecuted=true
tool-input-available toolCallId="c1" toolName="search" input={"q":"6x7"} providerExecuted=true
tool-output-available toolCallId="c1" output={"hits":1} providerExecuted=true
text-start id="t2"
text-delta id="t2" delta="It is 42."
text-end id="t2"
finish
[DONE]`

func uiStream(evs []chatEvent) string {
	s := chunkTypes(evs, "messageId", "id", "delta", "toolCallId", "toolName", "input", "output", "errorText", "providerExecuted")
	return strings.ReplaceAll(s, "tool-input-start toolCallId", "tool-input-start id=... toolCallId")
}

// TestChatStreamsTheAnswer: a question posted as the AI SDK posts it is
// queued as a prompt of the caller, to the agent its body names, in a
// conversation made on first use; the answer comes back as the UI message
// stream, part by part, exactly as the runner wrote it; and the stored
// messages are the question (with the client's id) and the answer (with
// the id the stream started with).
func TestChatStreamsTheAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	resp := b.postJSON("/v1/chat", b.alice, chatBody("chat-1", "u1", "What is 6 x 7?", "to", "bob"))
	if resp.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" {
		t.Fatalf("headers = %v", resp.Header)
	}
	st := events(t, resp)
	view := b.do("GET", "/v1/conversations/chat-1", b.alice, nil)
	b.want(view, 200, "")
	c := view.body["conversation"].(map[string]any)
	if c["createdBy"] != "alice" || c["participants"].([]any)[0] != "bob" {
		t.Fatalf("conversation made on first use = %v", c)
	}
	run := b.runnerConn("chat-1", b.bob)
	p := until(t, b, run, "prompt")
	if p["messageId"] != "u1" || p["content"] != "What is 6 x 7?" {
		t.Fatalf("prompt = %v", p)
	}
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	if got := uiStream(st.all()); got != wantUIStream {
		t.Fatalf("stream:\n%s\nwant:\n%s", got, wantUIStream)
	}
	r := b.do("GET", "/v1/conversations/chat-1/messages", b.alice, nil)
	ms := r.body["messages"].([]any)
	if len(ms) != 2 || ms[0].(map[string]any)["id"] != "u1" || ms[0].(map[string]any)["agentId"] != "alice" ||
		ms[1].(map[string]any)["id"] != "r1" || ms[1].(map[string]any)["content"] != "Let me look.It is 42." {
		t.Fatalf("messages = %s", r.raw)
	}
}

// TestChatResumesExactly: GET /v1/chat/{id}/stream answers 204 while no
// answer is under way, in a chat not made yet too (and makes nothing); mid-answer it replays the answer from its start and
// goes on live, chunk for chunk what the first stream sent; the same
// question posted again (a retried request) follows the same answer and
// asks nothing new; and once the answer ended it is 204 again.
func TestChatResumesExactly(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	if r := b.send("GET", "/v1/chat/"+id+"/stream", b.bob, nil); r.StatusCode != 204 {
		t.Fatalf("nothing under way: %d", r.StatusCode)
	}
	if r := b.send("GET", "/v1/chat/not-made-yet/stream", b.bob, nil); r.StatusCode != 204 {
		t.Fatalf("a chat not made yet: %d", r.StatusCode)
	}
	b.want(b.do("GET", "/v1/conversations/not-made-yet", b.admin, nil), 404, "not_found")
	first := events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u1", "What is 6 x 7?")))
	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, 4) // cut mid-answer: text, then a tool call running
	resumed := events(t, b.send("GET", "/v1/chat/"+id+"/stream", b.bob, nil))
	again := events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u1", "What is 6 x 7?")))
	for range 7 { // start, text-start, 2 deltas, text-end, tool-input-start, -available
		if _, ok := resumed.next(); !ok {
			t.Fatal("the resumed stream ended early")
		}
	}
	script(t, b, run, "r1", 4, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	one := uiStream(first.all())
	if one != wantUIStream {
		t.Fatalf("first stream:\n%s", one)
	}
	rest := resumed.all()
	if got := uiStream(rest); !strings.HasSuffix(wantUIStream, "\n"+got) || len(rest) != 6 {
		t.Fatalf("resumed stream, after its first 7 chunks:\n%s", got)
	}
	if got := uiStream(again.all()); got != wantUIStream {
		t.Fatalf("the question posted again:\n%s", got)
	}
	if r := b.do("GET", "/v1/conversations/"+id+"/messages", b.bob, nil); len(r.body["messages"].([]any)) != 2 {
		t.Fatalf("asking again wrote more: %s", r.raw)
	}
	if r := b.send("GET", "/v1/chat/"+id+"/stream", b.bob, nil); r.StatusCode != 204 {
		t.Fatalf("after the answer: %d", r.StatusCode)
	}
}

// TestChatStopRegenerateAndErrors: stopping (POST …/abort, by the asker)
// ends the answer with abort; a failed answer that its runner does not
// retry ends with error and its text; a regenerate removes the last exchange and asks again, so that
// the conversation holds only the new one.
func TestChatStopRegenerateAndErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := "chat-2" // made by bob's first question: bob owns it
	st := events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u1", "Stop me", "to", "alice")))
	run := b.runnerConn(id, b.alice)
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, 2)
	b.want(b.do("POST", "/v1/conversations/"+id+"/abort", b.bob, map[string]any{}), 202, "")
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted"}`)
	if got := chunkTypes(st.all()); got != "start\ntext-start\ntext-delta\ntext-end\nabort\n[DONE]" {
		t.Fatalf("stopped stream:\n%s", got)
	}

	st = events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u2", "Fail")))
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r2"}`)
	do(t, b, run, `{"type":"error","turnId":"r2","error":"the model is down"}`)
	do(t, b, run, `{"type":"complete"}`) // no retry: the answer ended with that error
	if got := chunkTypes(st.all(), "errorText"); got != "start\nerror errorText=\"the model is down\"\n[DONE]" {
		t.Fatalf("failed stream:\n%s", got)
	}

	st = events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u3", "Once")))
	until(t, b, run, "prompt")
	script(t, b, run, "r3", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	st.all()
	regen := chatBody(id, "u3", "Once", "trigger", "regenerate-message", "messageId", "r3")
	st = events(t, b.postJSON("/v1/chat", b.bob, regen))
	p := until(t, b, run, "prompt")
	// The question asked again has a new id: u3 named the question the
	// regenerate reverted, and an id is never taken again.
	again, _ := p["messageId"].(string)
	if again == "u3" || again == "" || p["content"] != "Once" {
		t.Fatalf("regenerated prompt = %v", p)
	}
	script(t, b, run, "r4", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	if got := uiStream(st.all()); got != strings.Replace(wantUIStream, `"r1"`, `"r4"`, 1) {
		t.Fatalf("regenerated stream:\n%s", got)
	}
	r := b.do("GET", "/v1/conversations/"+id+"/messages", b.bob, nil)
	var ids []string
	for _, m := range r.body["messages"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "u1,r1,u2,r2,"+again+",r4" {
		t.Fatalf("messages after the regenerate: %v", ids)
	}

	// A regenerate that names no message removes the asker's latest
	// question, found among its last messages, and asks it again.
	st = events(t, b.postJSON("/v1/chat", b.bob, chatBody(id, "u3", "Once", "trigger", "regenerate-message")))
	p = until(t, b, run, "prompt")
	twice, _ := p["messageId"].(string)
	if twice == "u3" || twice == again || twice == "" || p["content"] != "Once" {
		t.Fatalf("regenerated without a message: prompt %v", p)
	}
	script(t, b, run, "r5", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	st.all()
	ids = nil
	for _, m := range b.do("GET", "/v1/conversations/"+id+"/messages", b.bob, nil).body["messages"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "u1,r1,u2,r2,"+twice+",r5" {
		t.Fatalf("messages after a regenerate that names none: %v", ids)
	}
}

// asResponse reads a whole answer as the bundle's do returns it.
func asResponse(resp *http.Response) *response {
	raw, _ := io.ReadAll(resp.Body)
	r := &response{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}
