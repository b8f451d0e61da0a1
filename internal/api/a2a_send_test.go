package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// pendingInputs lists the request ids pending in conversation id, oldest
// first, as GET …/inputs has them.
func (b *bundle) pendingInputs(t *testing.T, id string) []string {
	t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/inputs", b.alice, nil)
	b.want(r, 200, "")
	var ids []string
	for _, in := range r.body["inputs"].([]any) {
		ids = append(ids, in.(map[string]any)["requestId"].(string))
	}
	return ids
}

// a2aAnswerMessage is the params of a SendMessage answering task taskID
// with one data part.
func a2aAnswerMessage(id, taskID string, data map[string]any, conf map[string]any) map[string]any {
	p := a2aMessage(id, "", "", conf)
	m := p["message"].(map[string]any)
	m["taskId"] = taskID
	m["parts"] = []any{map[string]any{"data": data}}
	return p
}

// TestA2AAnswersTwoInputs: a task waiting on two input requests at once
// is answered by one message whose data part maps each request id to its
// answer: the runner gets both, and the task goes on to completed. A data
// part naming a request the task does not wait for, or holding an answer
// that does not fit its request, is -32602 and answers neither.
func TestA2AAnswersTwoInputs(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "t-2")
	b := f.bundle
	b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-1", "t-2", "Clean", map[string]any{"returnImmediately": true})))
	f.ask(t, "q-1", "q-2")
	if got := b.pendingInputs(t, "t-2"); len(got) != 2 || got[0] != "q-1" || got[1] != "q-2" {
		t.Fatalf("pending before the answers: %v", got)
	}
	g := b.rpc("bob", b.alice, rpcCall("GetTask", map[string]any{"id": "t-2~m-1"}))
	if st := g["result"].(map[string]any)["status"].(map[string]any)["state"]; st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("the task waiting on two requests: %v", g)
	}
	a, b2 := map[string]any{"choices": []string{"A"}}, map[string]any{"choices": []string{"B"}}
	for _, c := range []struct {
		name string
		data map[string]any
	}{
		{"an unknown request id", map[string]any{"q-1": a, "q-2": b2, "q-9": a}},
		{"an answer not among the options", map[string]any{"q-1": a, "q-2": map[string]any{"choices": []string{"C"}}}},
		{"an answer of no form", map[string]any{"q-1": a, "q-2": "B"}},
		{"one answer, not a map of them", a},
	} {
		r := b.rpc("bob", b.alice, rpcCall("SendMessage", a2aAnswerMessage("bad", "t-2~m-1", c.data, map[string]any{"returnImmediately": true})))
		if code, _ := rpcErr(r); code != -32602 {
			t.Fatalf("%s: %v", c.name, r)
		}
		if got := b.pendingInputs(t, "t-2"); len(got) != 2 {
			t.Fatalf("%s answered some: pending now %v", c.name, got)
		}
	}
	r := b.rpc("bob", b.alice, rpcCall("SendMessage", a2aAnswerMessage("a-1", "t-2~m-1", map[string]any{"q-1": a, "q-2": b2}, map[string]any{"returnImmediately": true})))
	if r["result"] == nil {
		t.Fatalf("the answers: %v", r)
	}
	if got := b.pendingInputs(t, "t-2"); len(got) != 0 {
		t.Fatalf("pending after the answers: %v", got)
	}
	for _, want := range []struct{ req, choice string }{{"q-1", "A"}, {"q-2", "B"}} {
		got := until(t, b, f.run, "input.answered")
		ans, _ := got["answer"].(map[string]any)
		if ch, _ := ans["choices"].([]any); got["requestId"] != want.req || got["status"] != "answered" || len(ch) != 1 || ch[0] != want.choice {
			t.Fatalf("runner got %v, want %s answered %s", got, want.req, want.choice)
		}
		do(t, b, f.run, `{"type":"input.ack","requestId":"`+want.req+`"}`)
	}
	f.finish(t)
	g = b.rpc("bob", b.alice, rpcCall("GetTask", map[string]any{"id": "t-2~m-1"}))
	if st := g["result"].(map[string]any)["status"].(map[string]any)["state"]; st != "TASK_STATE_COMPLETED" {
		t.Fatalf("after both answers: %v", g)
	}
}

// TestA2ALegacyNonBlocking: 0.3's message/send with configuration.blocking
// false answers at once with the 0.3 task (kind "task"), submitted or
// working, and the task then completes (as 0.3's tasks/get reads it).
func TestA2ALegacyNonBlocking(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	run := b.runnerConn("c-1", b.bob)
	msg := map[string]any{"message": map[string]any{"kind": "message", "messageId": "m-1", "contextId": "c-1", "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": "What is 6 x 7?"}}},
		"configuration": map[string]any{"blocking": false}}
	// No runner answers until the send returned: a send that waited would
	// hang until the bundle's bound.
	s := b.rpc("bob", b.alice, rpcCall("message/send", msg))
	res, _ := s["result"].(map[string]any)
	st, _ := res["status"].(map[string]any)
	if res == nil || res["kind"] != "task" || res["id"] != "c-1~m-1" || res["contextId"] != "c-1" || (st["state"] != "submitted" && st["state"] != "working") {
		t.Fatalf("a non-blocking message/send: %v", s)
	}
	if p := until(t, b, run, "prompt"); p["messageId"] != "m-1" {
		t.Fatalf("prompt = %v", p)
	}
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	g := b.rpc("bob", b.alice, rpcCall("tasks/get", map[string]any{"id": "c-1~m-1"}))
	res, _ = g["result"].(map[string]any)
	if res == nil || res["kind"] != "task" || res["status"].(map[string]any)["state"] != "completed" || len(res["artifacts"].([]any)) != 3 {
		t.Fatalf("tasks/get after the answer: %v", g)
	}
}

// TestA2ASaysWhatItWaitsOn: a task whose prompt waits for a runner of its
// agent says so in a submitted status, not in silence; a runner then
// answers it.
func TestA2ASaysWhatItWaitsOn(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SendStreamingMessage", a2aMessage("m-1", "c-1", "Anyone?", nil))))
	for {
		ev, ok := st.next()
		if !ok {
			t.Fatal("the stream ended without saying what the task waits on")
		}
		if strings.Contains(ev.data, `"TASK_STATE_SUBMITTED"`) && strings.Contains(ev.data, "waits on a runner of bob") {
			break
		}
	}
	run := b.runnerConn("c-1", b.bob)
	until(t, b, run, "prompt")
}
