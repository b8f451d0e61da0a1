package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// frameRunner is a runner that sends frames as told and hands over every
// frame the server sends but acks.
type frameRunner struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan map[string]any
	acks   chan map[string]any
}

func dialFrames(t *testing.T, b *bundle, path, token string) *frameRunner {
	t.Helper()
	ws, _, err := websocket.Dial(b.ctx, "ws"+strings.TrimPrefix(b.url, "http")+path, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(parley.MaxFrameBytes)
	r := &frameRunner{t: t, ws: ws, frames: make(chan map[string]any, 64), acks: make(chan map[string]any, 64)}
	go func() {
		for {
			_, data, err := ws.Read(b.ctx)
			if err != nil {
				return
			}
			var f map[string]any
			_ = json.Unmarshal(data, &f)
			if f["type"] == "ack" || f["type"] == "error" && f["error"] != nil && f["conversationId"] == nil && f["turnId"] != nil {
				r.acks <- f
			} else {
				r.frames <- f
			}
		}
	}()
	t.Cleanup(func() { ws.CloseNow() })
	return r
}

// send sends a frame and returns its answer (an ack or an error).
func (r *frameRunner) send(f map[string]any) map[string]any {
	r.t.Helper()
	b, _ := json.Marshal(f)
	if err := r.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		r.t.Fatal(err)
	}
	select {
	case a := <-r.acks:
		return a
	case <-time.After(10 * time.Second):
		r.t.Fatalf("no answer to %s", b)
		return nil
	}
}

// next returns the next frame of type typ the server sends, skipping others.
func (r *frameRunner) next(typ string) map[string]any {
	r.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f := <-r.frames:
			if f["type"] == typ {
				return f
			}
		case <-timeout:
			r.t.Fatalf("no %s frame", typ)
			return nil
		}
	}
}

// none checks that no frame of type typ comes within a moment.
func (r *frameRunner) none(typ string) {
	r.t.Helper()
	timeout := time.After(300 * time.Millisecond)
	for {
		select {
		case f := <-r.frames:
			if f["type"] == typ {
				r.t.Fatalf("an unexpected %s frame: %v", typ, f)
			}
		case <-timeout:
			return
		}
	}
}

// askingConversation makes a conversation where alice (an agent) answers
// a prompt that admin asks as "human", and has her open message a1; it
// returns the conversation's path and alice's runner.
func askingConversation(t *testing.T, b *bundle) (string, *frameRunner) {
	t.Helper()
	v := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"alice", "bob"}, "members": []string{"human"}})
	cp := "/v1/conversations/" + v.body["conversation"].(map[string]any)["id"].(string)
	r := dialFrames(t, b, cp+"/runner", b.alice)
	if res := b.do("POST", cp+"/prompts", b.admin, map[string]any{"agentId": "human", "content": "deploy it", "to": "alice"}); res.status != 201 {
		t.Fatalf("prompt: %d %s", res.status, res.raw)
	}
	r.next("prompt")
	if a := r.send(map[string]any{"type": "message.create", "turnId": "a1"}); a["type"] != "ack" {
		t.Fatalf("create: %v", a)
	}
	return cp, r
}

func ask(t *testing.T, r *frameRunner, id string, extra map[string]any) {
	t.Helper()
	f := map[string]any{"type": "message.part.input-request", "turnId": "a1", "requestId": id, "kind": "approval", "title": "Deploy " + id + "?",
		"toolCallId": "call-" + id, "toolName": "deploy", "args": map[string]any{"env": id}}
	for k, v := range extra {
		f[k] = v
	}
	if a := r.send(f); a["type"] != "ack" {
		t.Fatalf("asking %s: %v", id, a)
	}
}

func lastSeqOf(b *bundle, cp string) float64 {
	v := b.do("GET", cp, b.viewer, nil)
	return v.body["head"].(map[string]any)["lastSeq"].(float64)
}

// TestInputRequestAnsweredAndTheRunnerGoesOn: a runner asks two approvals
// at once; they are answered over HTTP in the opposite order; the runner
// gets each answer once, acknowledges it and finishes its message, which
// shows both requests answered, by whom and when.
func TestInputRequestAnsweredAndTheRunnerGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	cp, r := askingConversation(t, b)
	ask(t, r, "r1", nil)
	ask(t, r, "r2", nil)

	m := b.do("GET", cp+"/messages/a1", b.viewer, nil).body
	if m["status"] != "streaming" || m["awaitingInput"] != true {
		t.Fatalf("the asking message is %v, awaitingInput %v; want streaming and awaiting input", m["status"], m["awaitingInput"])
	}
	head := b.do("GET", cp, b.viewer, nil).body["head"].(map[string]any)
	if p, _ := head["pendingInputs"].([]any); len(p) != 2 || p[0].(map[string]any)["requestId"] != "r1" {
		t.Fatalf("the head lists %v pending, want r1 then r2", head["pendingInputs"])
	}

	for _, id := range []string{"r2", "r1"} {
		res := b.do("POST", cp+"/inputs/"+id, b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": id == "r1", "reason": "because"}})
		if res.status != 200 || res.body["input"].(map[string]any)["status"] != "answered" {
			t.Fatalf("answering %s: %d %s", id, res.status, res.raw)
		}
		f := r.next("input.answered")
		if f["requestId"] != id || f["turnId"] != "a1" || f["answeredBy"] != "human" || f["answer"].(map[string]any)["approved"] != (id == "r1") {
			t.Fatalf("the runner got %v for %s", f, id)
		}
		if a := r.send(map[string]any{"type": "input.ack", "requestId": id}); a["type"] != "ack" {
			t.Fatalf("ack: %v", a)
		}
	}
	r.none("input.answered") // each once
	if p := b.do("GET", cp+"/inputs?status=open", b.viewer, nil).body["inputs"].([]any); len(p) != 0 {
		t.Fatalf("after the acks %d requests are still open", len(p))
	}
	r.send(map[string]any{"type": "message.part.text-delta", "turnId": "a1", "delta": "deployed"})
	r.send(map[string]any{"type": "message.finalize", "turnId": "a1", "reason": "end_turn"})
	m = b.do("GET", cp+"/messages/a1", b.viewer, nil).body
	var got []string
	for _, p := range m["parts"].([]any) {
		p := p.(map[string]any)
		if p["type"] == "input-request" {
			got = append(got, fmt.Sprintf("%s:%s:%s:%v", p["requestId"], p["status"], p["answeredBy"], p["answeredAt"] != nil))
		}
	}
	if strings.Join(got, " ") != "r1:answered:human:true r2:answered:human:true" || m["awaitingInput"] != nil {
		t.Fatalf("the finished message has requests %v (awaitingInput %v)", got, m["awaitingInput"])
	}
}

// TestInputAnswersRefused: who may not answer gets 403, an answer that
// does not fit 422, another answer after the first 409, and none of them
// writes anything; the same answer again is the first one's result.
func TestInputAnswersRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	cp, r := askingConversation(t, b)
	ask(t, r, "r1", nil)
	ask(t, r, "q1", map[string]any{"kind": "question", "toolCallId": "", "toolName": "", "args": nil, "options": []any{
		map[string]any{"label": "staging"}, map[string]any{"label": "prod"}}})
	ask(t, r, "q2", map[string]any{"kind": "question", "answerers": []string{"bob"}, "schema": map[string]any{
		"type": "object", "required": []string{"replicas"}, "properties": map[string]any{"replicas": map[string]any{"type": "integer", "minimum": 1}}}})

	before := lastSeqOf(b, cp)
	refused := []struct {
		name, token, agent, id string
		answer                 any
		status                 int
	}{
		{"the asking agent itself", b.alice, "", "r1", map[string]any{"approved": true}, 403},
		{"a member the request does not name", b.bob, "", "r1", map[string]any{"approved": true}, 403},
		{"a viewer", b.viewer, "", "r1", map[string]any{"approved": true}, 403},
		{"an approval that is not one", b.admin, "human", "r1", map[string]any{"approved": "yes"}, 422},
		{"an approval with more", b.admin, "human", "r1", map[string]any{"approved": true, "also": 1}, 422},
		{"a choice not among the options", b.admin, "human", "q1", map[string]any{"choices": []string{"moon"}}, 422},
		{"two choices of one", b.admin, "human", "q1", map[string]any{"choices": []string{"staging", "prod"}}, 422},
		{"an answer that does not fit the schema", b.bob, "", "q2", map[string]any{"replicas": 0}, 422},
		{"no answer", b.admin, "human", "r1", nil, 400},
		{"an unknown request", b.admin, "human", "nope", map[string]any{"approved": true}, 404},
		{"a bad id", b.admin, "human", "no%00pe", map[string]any{"approved": true}, 400},
	}
	for _, c := range refused {
		body := map[string]any{"answer": c.answer}
		if c.agent != "" {
			body["agentId"] = c.agent
		}
		if res := b.do("POST", cp+"/inputs/"+c.id, c.token, body); res.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, res.status, res.raw, c.status)
		}
	}
	if res := b.do("GET", cp+"/inputs?status=answered", b.viewer, nil); res.status != 422 {
		t.Errorf("a list of an unknown status: %d %s", res.status, res.raw)
	}
	if after := lastSeqOf(b, cp); after != before {
		t.Fatalf("refused answers wrote events: lastSeq %v → %v", before, after)
	}

	// A member the request names may answer; the same answer again is the
	// first result, another is 409.
	first := b.do("POST", cp+"/inputs/q2", b.bob, map[string]any{"answer": map[string]any{"replicas": 3}})
	again := b.do("POST", cp+"/inputs/q2", b.bob, map[string]any{"answer": map[string]any{"replicas": 3}})
	if first.status != 200 || again.status != 200 || first.body["seq"] != again.body["seq"] {
		t.Fatalf("answer and the same again: %d %s / %d %s", first.status, first.raw, again.status, again.raw)
	}
	if res := b.do("POST", cp+"/inputs/q2", b.bob, map[string]any{"answer": map[string]any{"replicas": 4}}); res.status != 409 || !strings.Contains(string(res.raw), "input_ended") {
		t.Fatalf("another answer: %d %s", res.status, res.raw)
	}
	if res := b.do("POST", cp+"/inputs/q1", b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"choices": []string{"prod"}}}); res.status != 200 {
		t.Fatalf("a choice among the options: %d %s", res.status, res.raw)
	}
	if res := b.do("POST", cp+"/inputs/r1", b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": false, "reason": "not today"}}); res.status != 200 {
		t.Fatalf("a denial: %d %s", res.status, res.raw)
	}

	// A request id is taken for good, and a schema must be one.
	if a := r.send(map[string]any{"type": "message.part.input-request", "turnId": "a1", "requestId": "r1", "kind": "approval", "title": "again"}); a["type"] != "error" {
		t.Fatalf("a request id used again: %v", a)
	}
	for _, bad := range []map[string]any{
		{"kind": "wish", "title": "x"},
		{"kind": "approval", "title": ""},
		{"kind": "question", "title": "x", "schema": map[string]any{"$ref": "file:///etc/passwd"}},
		{"kind": "question", "title": "x", "schema": map[string]any{"type": 12}},
		{"kind": "approval", "title": "x", "expiresAt": "2001-01-01T00:00:00Z"},
	} {
		f := map[string]any{"type": "message.part.input-request", "turnId": "a1", "requestId": "bad"}
		for k, v := range bad {
			f[k] = v
		}
		if a := r.send(f); a["type"] != "error" {
			t.Errorf("the request %v was taken: %v", bad, a)
		}
	}
}

// TestInputRequestsEnd: a stop cancels the pending requests of the answer
// it stops, and an expiry ends one expired; the runner is told of each,
// and neither takes an answer after.
func TestInputRequestsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	cp, r := askingConversation(t, b)
	ask(t, r, "soon", map[string]any{"expiresAt": time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	ask(t, r, "later", nil)
	f := r.next("input.answered")
	if f["requestId"] != "soon" || f["status"] != "expired" || f["answer"] != nil {
		t.Fatalf("the expiry: %v", f)
	}
	if res := b.do("POST", cp+"/inputs/soon", b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}); res.status != 409 {
		t.Fatalf("an answer after the expiry: %d %s", res.status, res.raw)
	}
	if res := b.do("POST", cp+"/abort", b.admin, map[string]any{"agentId": "human"}); res.status != 202 {
		t.Fatalf("stop: %d %s", res.status, res.raw)
	}
	// The runner is told to stop, and that its request was canceled.
	var abort, canceled map[string]any
	for abort == nil || canceled == nil {
		select {
		case f := <-r.frames:
			switch f["type"] {
			case "abort":
				abort = f
			case "input.answered":
				canceled = f
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after the stop: abort %v, input.answered %v", abort, canceled)
		}
	}
	if canceled["requestId"] != "later" || canceled["status"] != "canceled" || canceled["reason"] == "" {
		t.Fatalf("the stop: %v", canceled)
	}
	if res := b.do("POST", cp+"/inputs/later", b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}); res.status != 409 {
		t.Fatalf("an answer after the stop: %d %s", res.status, res.raw)
	}
	if p := b.do("GET", cp, b.viewer, nil).body["head"].(map[string]any)["pendingInputs"]; p != nil {
		t.Fatalf("after the stop the head lists %v pending", p)
	}
}

// TestInputRequestWithdrawn: a runner takes back a request answered some
// other way; a person's answer after it is 409, and the runner is told.
func TestInputRequestWithdrawn(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	cp, r := askingConversation(t, b)
	ask(t, r, "r1", nil)
	if a := r.send(map[string]any{"type": "input.withdraw", "requestId": "r1", "reason": "answered in OpenCode"}); a["type"] != "ack" {
		t.Fatalf("withdraw: %v", a)
	}
	if f := r.next("input.answered"); f["requestId"] != "r1" || f["status"] != "canceled" || f["reason"] != "answered in OpenCode" {
		t.Fatalf("the runner was told %v", f)
	}
	if res := b.do("POST", cp+"/inputs/r1", b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}); res.status != 409 {
		t.Fatalf("an answer after the withdraw: %d %s", res.status, res.raw)
	}
	if a := r.send(map[string]any{"type": "input.withdraw", "requestId": "r1"}); a["type"] != "ack" {
		t.Fatalf("a second withdraw: %v", a)
	}
	if a := r.send(map[string]any{"type": "input.withdraw", "requestId": "nope"}); a["type"] != "error" {
		t.Fatalf("an unknown request's withdraw: %v", a)
	}
}

// TestInputOutcomeRedelivered: a runner that reconnects before it
// acknowledged an answer gets it again (and what is still pending), and
// once acknowledged, never again.
func TestInputOutcomeRedelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	cp, r := askingConversation(t, b)
	ask(t, r, "r1", nil)
	ask(t, r, "r2", nil)
	r.ws.CloseNow() // it dies while waiting
	if res := b.do("POST", cp+"/inputs/r1", b.admin, map[string]any{"agentId": "human", "answer": map[string]any{"approved": true}}); res.status != 200 {
		t.Fatalf("answer: %d %s", res.status, res.raw)
	}
	r2 := dialFrames(t, b, cp+"/runner", b.alice)
	if f := r2.next("input.answered"); f["requestId"] != "r1" || f["status"] != "answered" || f["answer"].(map[string]any)["approved"] != true {
		t.Fatalf("after reconnecting the runner got %v", f)
	}
	if f := r2.next("input.pending"); f["requestId"] != "r2" || f["title"] != "Deploy r2?" || f["turnId"] != "a1" {
		t.Fatalf("after reconnecting the runner got %v as pending", f)
	}
	r2.send(map[string]any{"type": "input.ack", "requestId": "r1"})
	r2.ws.CloseNow()
	r3 := dialFrames(t, b, cp+"/runner", b.alice)
	r3.next("input.pending")
	r3.none("input.answered")
}
