package api_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// streamAs is conformance.stream as token: the request is checked against
// the document, and the answer must be an event stream.
func (c *conformance) streamAs(token, path string, body any) *http.Response {
	c.t.Helper()
	mk := func() *http.Request { return c.request("POST", path, token, body) }
	if ok, errs := c.v.ValidateHttpRequest(mk()); !ok {
		c.t.Errorf("POST %s: the request does not conform to openapi.json:%s", path, describe(errs))
	}
	res, err := http.DefaultClient.Do(mk())
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		c.t.Fatalf("POST %s answered %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	return res
}

// frames reads an SSE answer to its end, checking each data line against
// schema; it returns the lines.
func (c *conformance) frames(res *http.Response, schema string) []string {
	c.t.Helper()
	defer res.Body.Close()
	var out []string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "[DONE]" {
			c.frame(schema, []byte(data))
			out = append(out, data)
		}
	}
	return out
}

// TestOpenAPIInputFrames: with input requests, the chat protocols' frames
// (the AI SDK's approval and data parts, AG-UI's interrupt outcome) and the
// requests that answer them (a chat with an approval answered, a
// RunAgentInput with resume) conform to the document.
func TestOpenAPIInputFrames(t *testing.T) {
	t.Parallel()
	c := newConformance(t)
	for _, id := range []string{"chat-o", "thread-o"} {
		c.call("POST", "/v1/conversations", c.admin, map[string]any{"id": id, "participants": []string{"bob"}, "members": []string{"alice"}}, 201)
	}
	// ask has bob's runner of conversation id write an approval, with no
	// tool call before it, then a question; finish takes their outcomes
	// and ends the answer.
	ask := func(id string) func() {
		run := c.runnerConn(id, c.bob)
		until(t, c.bundle, run, "prompt")
		do(t, c.bundle, run, `{"type":"message.create","turnId":"r-`+id+`"}`)
		do(t, c.bundle, run, `{"type":"message.part.input-request","turnId":"r-`+id+`","requestId":"a-`+id+`","kind":"approval","toolCallId":"c9","toolName":"deploy","args":{"env":"prod"},"title":"Deploy?"}`)
		do(t, c.bundle, run, `{"type":"message.part.input-request","turnId":"r-`+id+`","requestId":"q-`+id+`","kind":"question","title":"Which?","options":[{"label":"A"}]}`)
		return func() {
			for _, req := range []string{"a-" + id, "q-" + id} {
				until(t, c.bundle, run, "input.answered")
				do(t, c.bundle, run, `{"type":"input.ack","requestId":"`+req+`"}`)
			}
			do(t, c.bundle, run, `{"type":"message.part.tool-update","turnId":"r-`+id+`","callId":"c9","toolName":"deploy","status":"completed","result":"ok"}`)
			do(t, c.bundle, run, `{"type":"message.finalize","turnId":"r-`+id+`","reason":"end_turn"}`)
			do(t, c.bundle, run, `{"type":"complete"}`)
		}
	}

	// The AI SDK: paused at the approval; the approval answered (the
	// question over the API) goes on.
	st := c.streamAs(c.alice, "/v1/chat", chatBody("chat-o", "u1", "Deploy", "to", "bob"))
	finish := ask("chat-o")
	if got := strings.Join(c.frames(st, "UIMessageChunk"), "\n"); !strings.Contains(got, `"type":"tool-approval-request"`) || !strings.Contains(got, `"type":"data-input-request"`) {
		t.Fatalf("the paused stream:\n%s", got)
	}
	body := approvalBody("chat-o", "a-chat-o", "true")
	body["messageId"] = "r-chat-o"
	body["messages"].([]any)[1].(map[string]any)["id"] = "r-chat-o"
	st = c.streamAs(c.alice, "/v1/chat", body)
	c.call("POST", "/v1/conversations/chat-o/inputs/q-chat-o", c.alice, map[string]any{"answer": map[string]any{"choices": []string{"A"}}}, 200)
	finish()
	if got := c.frames(st, "UIMessageChunk"); len(got) < 4 {
		t.Fatalf("the rest: %v", got)
	}

	// AG-UI: interrupted at the approval, resumed, interrupted at the
	// question, resumed to the end.
	in := runInput("thread-o", "run-1", "Deploy", map[string]any{"to": "bob"})
	st = c.streamAs(c.alice, "/v1/ag-ui", in)
	finish = ask("thread-o")
	for i, want := range []string{"a-thread-o", "q-thread-o"} {
		got := c.frames(st, "AGUIEvent")
		if last := got[len(got)-1]; !strings.Contains(last, `"type":"interrupt"`) || !strings.Contains(last, `"id":"`+want+`"`) {
			t.Fatalf("run %d ended with %s", i+1, last)
		}
		answer := map[string]any{"approved": true}
		if i == 1 {
			answer = map[string]any{"choices": []string{"A"}}
		}
		in = runInput("thread-o", "run-"+string(rune('2'+i)), "", map[string]any{"to": "bob"})
		in["resume"] = []any{map[string]any{"interruptId": want, "status": "resolved", "payload": answer}}
		st = c.streamAs(c.alice, "/v1/ag-ui", in)
	}
	finish()
	if got := c.frames(st, "AGUIEvent"); !strings.Contains(got[len(got)-1], `"type":"RUN_FINISHED"`) || strings.Contains(got[len(got)-1], "interrupt") {
		t.Fatalf("the last run: %v", got)
	}
}
