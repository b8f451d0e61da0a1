package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// specRunner is a runner whose every frame, both ways, is checked against
// the document: it answers each prompt with a message of text and a tool
// call (a prompt "hold" it leaves unanswered), and answers an abort with
// aborted.
type specRunner struct {
	c    *conformance
	ws   *websocket.Conn
	wide bool // agent-wide: frames name their conversation
	mu   sync.Mutex
	seen map[string]int // frame types the server sent
}

func (c *conformance) runner(path string, wide bool) *specRunner {
	c.t.Helper()
	u := "ws" + strings.TrimPrefix(c.url, "http") + path
	ws, _, err := websocket.Dial(c.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.alice}}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { ws.CloseNow() })
	r := &specRunner{c: c, ws: ws, wide: wide, seen: map[string]int{}}
	go r.run()
	return r
}

func (r *specRunner) send(conv string, f map[string]any) {
	if r.wide {
		f["conversationId"] = conv
	}
	b, _ := json.Marshal(f)
	r.c.frame("RunnerFrame", b)
	_ = r.ws.Write(r.c.ctx, websocket.MessageText, b)
}

func (r *specRunner) run() {
	asked := map[string]string{} // the prompt each message that asks answers
	for n := 0; ; n++ {
		_, data, err := r.ws.Read(r.c.ctx)
		if err != nil {
			return
		}
		r.c.frame("RunnerServerFrame", data)
		var f struct{ Type, ConversationID, MessageID, Content, TurnID string }
		_ = json.Unmarshal(data, &f)
		r.mu.Lock()
		r.seen[f.Type]++
		r.mu.Unlock()
		if r.wide && f.ConversationID == "" {
			r.c.t.Errorf("an agent-wide runner was sent a frame without its conversation: %s", data)
		}
		switch {
		case f.Type == "prompt" && f.Content == "ask":
			m := fmt.Sprintf("r%d", n)
			asked[m] = f.MessageID
			r.send(f.ConversationID, map[string]any{"type": "message.create", "turnId": m})
			r.send(f.ConversationID, map[string]any{"type": "message.part.input-request", "turnId": m, "requestId": "ask-" + m, "kind": "approval",
				"toolCallId": "c9", "toolName": "deploy", "args": map[string]any{"env": "prod"}, "title": "Deploy to prod?"})
		case f.Type == "input.answered":
			r.send(f.ConversationID, map[string]any{"type": "input.ack", "requestId": "ask-" + f.TurnID})
			r.send(f.ConversationID, map[string]any{"type": "message.finalize", "turnId": f.TurnID, "reason": "end_turn"})
			r.send(f.ConversationID, map[string]any{"type": "complete", "messageId": asked[f.TurnID]})
		case f.Type == "prompt" && f.Content != "hold":
			m := fmt.Sprintf("r%d", n)
			r.send(f.ConversationID, map[string]any{"type": "message.create", "turnId": m, "opencodeSessionId": "ses_1"})
			r.send(f.ConversationID, map[string]any{"type": "message.part.text-delta", "turnId": m, "delta": "Let me see. "})
			r.send(f.ConversationID, map[string]any{"type": "message.part.tool-update", "turnId": m, "callId": "c1", "toolName": "calc", "status": "running", "args": map[string]any{"x": 6}})
			r.send(f.ConversationID, map[string]any{"type": "message.part.tool-update", "turnId": m, "callId": "c1", "toolName": "calc", "status": "completed", "result": 42})
			r.send(f.ConversationID, map[string]any{"type": "message.part.text-delta", "turnId": m, "delta": "42"})
			r.send(f.ConversationID, map[string]any{"type": "message.state", "turnId": m})
			r.send(f.ConversationID, map[string]any{"type": "message.finalize", "turnId": m, "reason": "end_turn"})
			r.send(f.ConversationID, map[string]any{"type": "complete", "messageId": f.MessageID})
		case f.Type == "abort":
			r.send(f.ConversationID, map[string]any{"type": "aborted", "messageId": f.MessageID})
		}
	}
}

// sse reads an SSE answer's data lines, each checked against schema,
// until stop says so or the answer ends; it returns them.
func (c *conformance) sse(res *http.Response, schema string, stop func(data []byte) bool) [][]byte {
	c.t.Helper()
	defer res.Body.Close()
	var frames [][]byte
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		c.frame(schema, []byte(data))
		frames = append(frames, []byte(data))
		if stop != nil && stop([]byte(data)) {
			break
		}
	}
	return frames
}

// stream sends a request for a streamed answer as alice, checked against
// the document, and returns the answer.
func (c *conformance) stream(method, path string, body any) *http.Response {
	c.t.Helper()
	mk := func() *http.Request {
		req, _ := http.NewRequestWithContext(c.ctx, method, c.url+path, http.NoBody)
		if body != nil {
			b, _ := json.Marshal(body)
			req, _ = http.NewRequestWithContext(c.ctx, method, c.url+path, strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+c.alice)
		return req
	}
	if ok, errs := c.v.ValidateHttpRequest(mk()); !ok {
		c.t.Errorf("%s %s: the request does not conform to openapi.json:%s", method, path, describe(errs))
	}
	res, err := http.DefaultClient.Do(mk())
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		c.t.Fatalf("%s %s answered %d %s", method, path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	return res
}

// TestOpenAPIStreamFrames: the frames of every kind of stream (SSE and
// WebSocket streams of a conversation, both runner endpoints, the AI SDK's
// chat stream and its resume, AG-UI) conform to the schemas the document
// names for them.
func TestOpenAPIStreamFrames(t *testing.T) {
	t.Parallel()
	c := newConformance(t)
	v := c.call("POST", "/v1/conversations", c.admin, map[string]any{"participants": []string{"alice"}, "members": []string{"human"}}, 201)
	id := v.body["conversation"].(map[string]any)["id"].(string)
	cp := "/v1/conversations/" + id
	live := c.stream("GET", cp+"/stream", nil) // a snapshot, then live
	r := c.runner(cp+"/runner", false)

	c.call("POST", cp+"/prompts", c.admin, map[string]any{"agentId": "human", "content": "What is 6 x 7?"}, 201)
	c.call("POST", cp+"/prompts", c.admin, map[string]any{"agentId": "human", "content": "hold"}, 201)
	waitFor(t, func() bool { return c.promptState(cp, "hold") })
	c.call("POST", cp+"/abort", c.admin, nil, 202)
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.seen["abort"] > 0 })
	waitFor(t, func() bool { return c.promptsEmpty(cp) })

	// An input request: the runner asks, a person answers, the runner goes on.
	c.call("POST", cp+"/prompts", c.admin, map[string]any{"agentId": "human", "content": "ask"}, 201)
	waitFor(t, func() bool {
		res := c.call("GET", cp+"/inputs", c.viewer, nil, 200)
		return len(res.body["inputs"].([]any)) == 1
	})
	in := c.call("GET", cp+"/inputs?status=open", c.viewer, nil, 200).body["inputs"].([]any)[0].(map[string]any)
	rid := in["requestId"].(string)
	c.call("POST", cp+"/inputs/"+rid, c.alice, map[string]any{"answer": map[string]any{"approved": true}}, 403) // the asker itself
	c.call("POST", cp+"/inputs/"+rid, c.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": "yes"}}, 422)
	c.call("POST", cp+"/inputs/"+rid, c.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}, 200)
	c.call("POST", cp+"/inputs/"+rid, c.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}, 200)
	c.call("POST", cp+"/inputs/"+rid, c.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": false}}, 409)
	c.call("POST", cp+"/inputs/nope", c.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}, 404)
	waitFor(t, func() bool { return c.promptsEmpty(cp) })
	last := c.lastSeq(id)

	seq := func(data []byte) float64 {
		var f struct{ Seq float64 }
		_ = json.Unmarshal(data, &f)
		return f.Seq
	}
	types := map[string]int{}
	for _, f := range c.sse(live, "StreamFrame", func(d []byte) bool { return seq(d) >= last }) {
		var h struct{ Type string }
		_ = json.Unmarshal(f, &h)
		types[h.Type]++
	}
	for _, want := range []string{"init", "guidance", "message", "chunk", "part.updated", "message.updated", "prompt.queued",
		"prompt.dispatched", "prompt.completed", "prompt.aborted", "prompt.canceled", "input.answered", "input.acked"} {
		if types[want] == 0 {
			t.Errorf("the SSE stream had no %s frame to check: %v", want, types)
		}
	}
	c.sse(c.stream("GET", cp+"/stream?after=0", nil), "StreamFrame", func(d []byte) bool { return seq(d) >= last })

	ws, _, err := websocket.Dial(c.ctx, "ws"+strings.TrimPrefix(c.url, "http")+cp+"/ws?after=0", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.viewer}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for {
		_, data, err := ws.Read(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.frame("StreamFrame", data)
		if seq(data) >= last {
			break
		}
	}

	// The chat endpoints and AG-UI, answered by alice's agent-wide runner.
	wide := c.runner("/v1/agents/alice/runner", true)
	chat := map[string]any{"id": "chat-1", "to": "alice", "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "What is 6 x 7?"}}}}}
	chunks := c.sse(c.stream("POST", "/v1/chat", chat), "UIMessageChunk", nil)
	if len(chunks) < 6 {
		t.Errorf("the chat stream had %d chunks", len(chunks))
	}
	c.sse(c.stream("POST", "/v1/chat", chat), "UIMessageChunk", nil) // the same question: its answer again
	c.call("GET", "/v1/chat/chat-1/stream", c.alice, nil, 204)
	run := map[string]any{"threadId": "thread-1", "runId": "run-1", "forwardedProps": map[string]any{"to": "alice"},
		"messages": []any{map[string]any{"id": "u1", "role": "user", "content": "What is 6 x 7?"}}, "tools": []any{}, "context": []any{}, "state": map[string]any{}}
	events := c.sse(c.stream("POST", "/v1/ag-ui", run), "AGUIEvent", nil)
	if len(events) < 6 {
		t.Errorf("the AG-UI run had %d events", len(events))
	}
	// Each of the two prompts' 8 frames is acknowledged.
	waitFor(t, func() bool { wide.mu.Lock(); defer wide.mu.Unlock(); return wide.seen["ack"] == 16 })
	wide.mu.Lock()
	defer wide.mu.Unlock()
	if wide.seen["prompt"] != 2 {
		t.Errorf("the agent-wide runner was sent %v, want 2 prompts and their acks", wide.seen)
	}
}

// promptState reports whether the prompt with this text was dispatched,
// second.
func (c *conformance) promptState(cp, content string) bool {
	r := c.do("GET", cp+"/events?after=0&limit=1000", c.viewer, nil)
	return strings.Contains(string(r.raw), `"content":"`+content+`"`) && strings.Count(string(r.raw), `"type":"prompt.dispatched"`) == 2
}

// promptsEmpty reports whether the queue is empty.
func (c *conformance) promptsEmpty(cp string) bool {
	r := c.do("GET", cp+"/prompts", c.viewer, nil)
	ps, _ := r.body["prompts"].([]any)
	return r.status == 200 && len(ps) == 0
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatal("gave up waiting")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestOpenAPIInitWithStreamedText: a snapshot taken while a v1 runner
// streams text that no row holds yet carries that text (init.streaming),
// as the document describes it.
func TestOpenAPIInitWithStreamedText(t *testing.T) {
	t.Parallel()
	c := newConformance(t)
	v := c.call("POST", "/v1/conversations", c.admin, map[string]any{"participants": []string{"alice"}, "members": []string{"human"}, "messageFormat": "v1"}, 201)
	cp := "/v1/conversations/" + v.body["conversation"].(map[string]any)["id"].(string)
	r := c.runner(cp+"/runner", false)
	r.send("", map[string]any{"type": "stream", "content": "Let me look"})
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.seen["ack"] > 0 })
	init := c.sse(c.stream("GET", cp+"/stream", nil), "StreamFrame", func([]byte) bool { return true })
	if len(init) != 1 || !strings.Contains(string(init[0]), `"streaming":[{"agentId":"alice","turn":1,"turnId":"","seq":`) {
		t.Fatalf("the init frame %s, want alice's text in it", init)
	}
}
