package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/a2a"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/protocols"
	"github.com/parleyhq/parley/internal/retention"
)

// rpcCall is a JSON-RPC 2.0 request of method with params.
func rpcCall(method string, params any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
}

// a2aMessage is the params of a 1.0 SendMessage of text in context ctxID
// (none when empty), with message id id.
func a2aMessage(id, ctxID, text string, conf map[string]any) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	if ctxID != "" {
		m["contextId"] = ctxID
	}
	p := map[string]any{"message": m}
	if conf != nil {
		p["configuration"] = conf
	}
	return p
}

// rpcResult posts a call to agent's A2A endpoint as token and returns its
// decoded JSON-RPC response (HTTP 200 required).
func (b *bundle) rpc(agent, token string, call any, header ...string) map[string]any {
	b.t.Helper()
	r := b.do("POST", "/v1/a2a/"+agent, token, call, header...)
	if r.status != 200 {
		b.t.Fatalf("A2A call: %d %s", r.status, r.raw)
	}
	return r.body
}

// rpcErr returns the error code of a JSON-RPC response, and its data's code.
func rpcErr(resp map[string]any) (float64, string) {
	e, _ := resp["error"].(map[string]any)
	if e == nil {
		return 0, ""
	}
	code, _ := e["code"].(float64)
	d, _ := e["data"].(map[string]any)
	s, _ := d["code"].(string)
	return code, s
}

// streamKinds lists an A2A stream's events: each result's kind (task,
// statusUpdate state, artifactUpdate with its text or data state, append
// and lastChunk).
func streamKinds(t *testing.T, evs []chatEvent) string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		var env struct {
			Result struct {
				Task *struct {
					Status struct{ State string } `json:"status"`
				} `json:"task"`
				StatusUpdate *struct {
					Status struct{ State string } `json:"status"`
				} `json:"statusUpdate"`
				ArtifactUpdate *struct {
					Artifact struct {
						ArtifactID string `json:"artifactId"`
						Parts      []struct {
							Text *string        `json:"text"`
							Data map[string]any `json:"data"`
						} `json:"parts"`
					} `json:"artifact"`
					Append    bool `json:"append"`
					LastChunk bool `json:"lastChunk"`
				} `json:"artifactUpdate"`
				Metadata map[string]any `json:"metadata"`
			} `json:"result"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		r := env.Result
		switch {
		case env.Error != nil:
			out = append(out, fmt.Sprintf("error %v", env.Error))
		case r.Task != nil:
			out = append(out, "task "+r.Task.Status.State)
		case r.StatusUpdate != nil:
			out = append(out, "status "+r.StatusUpdate.Status.State)
		case r.ArtifactUpdate != nil:
			a := r.ArtifactUpdate
			s := "artifact " + a.Artifact.ArtifactID
			if p := a.Artifact.Parts[0]; p.Text != nil {
				s += fmt.Sprintf(" %q", *p.Text)
			} else {
				s += fmt.Sprintf(" %v", p.Data["state"])
			}
			if a.Append {
				s += " append"
			}
			if a.LastChunk {
				s += " last"
			}
			out = append(out, s)
		default:
			out = append(out, "? "+ev.data)
		}
	}
	return strings.Join(out, "\n")
}

// wantA2AStream is the stream of the scripted answer r1.
const wantA2AStream = `task TASK_STATE_SUBMITTED
status TASK_STATE_WORKING
artifact t0 "Let me "
artifact t0 "look." append
artifact t0 "" append last
artifact tool-c1 input-streaming
artifact tool-c1 input-available
artifact tool-c1 output-available last
artifact t2 "It is 42."
artifact t2 "" append last
status TASK_STATE_COMPLETED`

// TestA2ACard: every agent id has a card, for any valid token, with both
// versions' fields; none without a token.
func TestA2ACard(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	path := "/v1/a2a/bob/.well-known/agent-card.json"
	b.want(b.do("GET", path, "", nil), 401, "unauthorized")
	r := b.do("GET", path, b.viewer, nil)
	b.want(r, 200, "")
	ifs, _ := r.body["supportedInterfaces"].([]any)
	if r.body["name"] != "bob" || len(ifs) != 2 || r.body["url"] != b.url+"/v1/a2a/bob" || r.body["protocolVersion"] != "0.3.0" ||
		r.body["preferredTransport"] != "JSONRPC" || r.body["capabilities"].(map[string]any)["streaming"] != true {
		t.Fatalf("card: %s", r.raw)
	}
	for i, v := range []string{"1.0", "0.3"} {
		if f := ifs[i].(map[string]any); f["protocolVersion"] != v || f["url"] != b.url+"/v1/a2a/bob" || f["protocolBinding"] != "JSONRPC" {
			t.Fatalf("interface %d: %v", i, f)
		}
	}
	if skills, _ := r.body["skills"].([]any); len(skills) != 1 {
		t.Fatalf("default card's skills: %s", r.raw)
	}
	b.want(b.do("GET", "/v1/a2a/bad%20id/.well-known/agent-card.json", b.viewer, nil), 422, "invalid_value")
}

// TestA2ASendBlocking: SendMessage answers once the task completed, with
// the runner's text as its artifacts and the exchange as its history; the
// same messageId again is the same task (nothing queued twice); GetTask
// reads it, historyLength bounds the history.
func TestA2ASendBlocking(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	run := b.runnerConn("c-1", b.bob)
	got := make(chan map[string]any, 1)
	go func() {
		got <- b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-1", "c-1", "What is 6 x 7?", nil)))
	}()
	if p := until(t, b, run, "prompt"); p["messageId"] != "m-1" || p["content"] != "What is 6 x 7?" {
		t.Fatalf("prompt = %v", p)
	}
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	resp := <-got
	task, _ := resp["result"].(map[string]any)["task"].(map[string]any)
	if task == nil || task["id"] != "c-1~m-1" || task["contextId"] != "c-1" || task["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" {
		t.Fatalf("send: %v", resp)
	}
	arts := task["artifacts"].([]any)
	var texts []string
	for _, a := range arts {
		if p := a.(map[string]any)["parts"].([]any)[0].(map[string]any); p["text"] != nil {
			texts = append(texts, p["text"].(string))
		}
	}
	if strings.Join(texts, "|") != "Let me look.|It is 42." || len(arts) != 3 {
		t.Fatalf("artifacts: %v", arts)
	}
	hist := task["history"].([]any)
	if len(hist) != 2 || hist[0].(map[string]any)["role"] != "ROLE_USER" || hist[1].(map[string]any)["role"] != "ROLE_AGENT" {
		t.Fatalf("history: %v", hist)
	}
	again := b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-1", "c-1", "What is 6 x 7?", map[string]any{"historyLength": 1})))
	if task := again["result"].(map[string]any)["task"].(map[string]any); task["id"] != "c-1~m-1" || len(task["history"].([]any)) != 1 {
		t.Fatalf("the same send again: %v", again)
	}
	if r := b.do("GET", "/v1/conversations/c-1/messages", b.alice, nil); len(r.body["messages"].([]any)) != 2 {
		t.Fatalf("the same send again asked again: %s", r.raw)
	}
	g := b.rpc("bob", b.viewer, rpcCall("GetTask", map[string]any{"id": "c-1~m-1", "historyLength": 0}))
	if task := g["result"].(map[string]any); task["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" || task["history"] != nil || len(task["artifacts"].([]any)) != 3 {
		t.Fatalf("GetTask: %v", g)
	}
	// Another agent's A2A endpoint does not have it.
	if code, _ := rpcErr(b.rpc("alice", b.admin, rpcCall("GetTask", map[string]any{"id": "c-1~m-1"}))); code != -32001 {
		t.Fatalf("the task at another agent: %v", code)
	}
	// A message with no contextId makes a conversation.
	im := b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-2", "", "Hello", map[string]any{"returnImmediately": true})))
	task = im["result"].(map[string]any)["task"].(map[string]any)
	if ctx, _ := task["contextId"].(string); ctx == "" || task["status"].(map[string]any)["state"] != "TASK_STATE_SUBMITTED" || task["id"] != ctx+"~m-2" {
		t.Fatalf("returnImmediately in a new context: %v", im)
	}
	if r := b.do("GET", "/v1/conversations/"+task["contextId"].(string), b.alice, nil); r.status != 200 {
		t.Fatalf("the new context's conversation: %d %s", r.status, r.raw)
	}
}

// TestA2AStreamAndResume: SendStreamingMessage streams the task, then its
// answer as status and artifact updates, each with Parley's position as its
// SSE id (and in its metadata); SubscribeToTask with any of them as
// Last-Event-ID (or params.metadata.parley.after) gets exactly the events
// after it, though the task ended; without one, a task that ended is
// UnsupportedOperation.
func TestA2AStreamAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	run := b.runnerConn("c-1", b.bob)
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SendStreamingMessage", a2aMessage("m-1", "c-1", "What is 6 x 7?", nil))))
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	full := st.all()
	if got := streamKinds(t, full); got != wantA2AStream {
		t.Fatalf("stream:\n%s\nwant:\n%s", got, wantA2AStream)
	}
	var ids []string
	for _, ev := range full {
		if ev.id == "" || slices.Contains(ids, ev.id) || !strings.Contains(ev.data, `"position":"`+ev.id+`"`) {
			t.Fatalf("event %q has id %q (ids so far %v)", ev.data, ev.id, ids)
		}
		ids = append(ids, ev.id)
	}
	sub := func(after string, header bool) []chatEvent {
		params := map[string]any{"id": "c-1~m-1"}
		var h []string
		if header {
			h = []string{"Last-Event-ID", after}
		} else {
			params["metadata"] = map[string]any{"parley": map[string]any{"after": after}}
		}
		return events(t, b.postJSON("/v1/a2a/bob", b.viewer, rpcCall("SubscribeToTask", params), h...)).all()
	}
	for i, id := range ids {
		rest := sub(id, i%2 == 0)
		if got := streamKinds(t, append(slices.Clone(full[:i+1]), rest...)); got != wantA2AStream {
			t.Fatalf("resumed after %s:\n%s", id, streamKinds(t, rest))
		}
	}
	if code, _ := rpcErr(b.rpc("bob", b.alice, rpcCall("SubscribeToTask", map[string]any{"id": "c-1~m-1"}))); code != -32004 {
		t.Fatalf("a subscribe to an ended task with no position: %v", code)
	}
}

// TestA2ACancel: CancelTask withdraws a prompt still queued and stops one
// being answered (its runner told to stop); both tasks end canceled, and
// an ended task is not cancelable. A viewer may not cancel.
func TestA2ACancel(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	q := b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-1", "c-1", "Queued", map[string]any{"returnImmediately": true})))
	if q["result"] == nil {
		t.Fatalf("send: %v", q)
	}
	if _, data := rpcErr(b.rpc("bob", b.viewer, rpcCall("CancelTask", map[string]any{"id": "c-1~m-1"}))); data != "forbidden" {
		t.Fatalf("a viewer's cancel: %v", data)
	}
	c := b.rpc("bob", b.alice, rpcCall("CancelTask", map[string]any{"id": "c-1~m-1"}))
	if st := c["result"].(map[string]any)["status"].(map[string]any)["state"]; st != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel of a queued task: %v", c)
	}
	if code, _ := rpcErr(b.rpc("bob", b.alice, rpcCall("CancelTask", map[string]any{"id": "c-1~m-1"}))); code != -32002 {
		t.Fatalf("cancel of an ended task: %v", code)
	}
	run := b.runnerConn("c-1", b.bob)
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SendStreamingMessage", a2aMessage("m-2", "c-1", "Running", nil))))
	until(t, b, run, "prompt")
	script(t, b, run, "r2", 0, 2)
	got := make(chan map[string]any, 1)
	go func() { got <- b.rpc("bob", b.alice, rpcCall("CancelTask", map[string]any{"id": "c-1~m-2"})) }()
	until(t, b, run, "abort")
	do(t, b, run, `{"type":"aborted"}`)
	if c := <-got; c["result"].(map[string]any)["status"].(map[string]any)["state"] != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel of a running task: %v", c)
	}
	if got := streamKinds(t, st.all()); !strings.HasSuffix(got, "status TASK_STATE_CANCELED") {
		t.Fatalf("the stopped task's stream:\n%s", got)
	}
}

// TestA2AInputRequired: a question of the agent makes the task
// input-required (the stream ends there, its status message holding the
// request); a message naming the task answers it, and the task goes on;
// an approval answered with POST …/inputs/{requestId} does as well.
func TestA2AInputRequired(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "t-i")
	b := f.bundle
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SendStreamingMessage", a2aMessage("m-1", "t-i", "Clean", nil))))
	f.ask(t, "q-1")
	evs := st.all()
	last := evs[len(evs)-1].data
	if !strings.HasSuffix(streamKinds(t, evs), "status TASK_STATE_INPUT_REQUIRED") || !strings.Contains(last, `"requestId":"q-1"`) || !strings.Contains(last, `"kind":"question"`) {
		t.Fatalf("stream until the question:\n%s\n%s", streamKinds(t, evs), last)
	}
	// An answer that does not fit answers nothing.
	bad := a2aMessage("a-1", "t-i", "", nil)
	bad["message"].(map[string]any)["taskId"] = "t-i~m-1"
	bad["message"].(map[string]any)["parts"] = []any{map[string]any{"data": map[string]any{"choices": []string{"C"}}}}
	if code, _ := rpcErr(b.rpc("bob", b.alice, rpcCall("SendMessage", bad))); code != -32602 {
		t.Fatalf("an answer not among the options: %v", code)
	}
	ans := a2aMessage("a-2", "t-i", "", map[string]any{"returnImmediately": true})
	ans["message"].(map[string]any)["taskId"] = "t-i~m-1"
	ans["message"].(map[string]any)["parts"] = []any{map[string]any{"data": map[string]any{"choices": []string{"A"}}}}
	r := b.rpc("bob", b.alice, rpcCall("SendMessage", ans))
	if r["result"] == nil {
		t.Fatalf("the answer: %v", r)
	}
	f.finish(t, "q-1")
	g := b.rpc("bob", b.alice, rpcCall("GetTask", map[string]any{"id": "t-i~m-1"}))
	if g["result"].(map[string]any)["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" {
		t.Fatalf("after the answer: %v", g)
	}
	// An approval, answered over HTTP.
	got := make(chan map[string]any, 1)
	go func() { got <- b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-2", "t-i", "Again", nil))) }()
	until(t, b, f.run, "prompt")
	do(t, b, f.run, `{"type":"message.create","turnId":"r2"}`)
	do(t, b, f.run, `{"type":"message.part.input-request","turnId":"r2","requestId":"a-1","kind":"approval","title":"May I?"}`)
	if task := (<-got)["result"].(map[string]any)["task"].(map[string]any); task["status"].(map[string]any)["state"] != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("blocking send until the approval: %v", task)
	}
	b.want(b.do("POST", "/v1/conversations/t-i/inputs/a-1", b.alice, map[string]any{"answer": map[string]any{"approved": true}}), 200, "")
	until(t, b, f.run, "input.answered")
	do(t, b, f.run, `{"type":"message.finalize","turnId":"r2","reason":"end_turn"}`)
	do(t, b, f.run, `{"type":"complete"}`)
	if g := b.rpc("bob", b.alice, rpcCall("GetTask", map[string]any{"id": "t-i~m-2"})); g["result"].(map[string]any)["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" {
		t.Fatalf("after the approval: %v", g)
	}
}

// TestA2ALegacy: 0.3's methods are answered in 0.3's JSON.
func TestA2ALegacy(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	run := b.runnerConn("c-1", b.bob)
	msg := map[string]any{"message": map[string]any{"kind": "message", "messageId": "m-1", "contextId": "c-1", "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": "What is 6 x 7?"}}}}
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("message/stream", msg)))
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	var kinds []string
	for _, ev := range st.all() {
		var env struct {
			Result struct {
				Kind   string `json:"kind"`
				Status struct {
					State string `json:"state"`
				} `json:"status"`
				Final bool `json:"final"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(ev.data), &env)
		k := env.Result.Kind
		if env.Result.Status.State != "" {
			k += " " + env.Result.Status.State
		}
		if env.Result.Final {
			k += " final"
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, ","); !strings.HasPrefix(got, "task submitted,status-update working,artifact-update") || !strings.HasSuffix(got, "status-update completed final") {
		t.Fatalf("0.3 stream: %s", got)
	}
	g := b.rpc("bob", b.alice, rpcCall("tasks/get", map[string]any{"id": "c-1~m-1"}))
	if res := g["result"].(map[string]any); res["kind"] != "task" || res["status"].(map[string]any)["state"] != "completed" {
		t.Fatalf("tasks/get: %v", g)
	}
	s := b.rpc("bob", b.alice, rpcCall("message/send", msg))
	if res := s["result"].(map[string]any); res["kind"] != "task" || res["id"] != "c-1~m-1" {
		t.Fatalf("message/send: %v", s)
	}
}

// TestA2AConfiguredCard: -agent-cards names an agent's card.
func TestA2AConfiguredCard(t *testing.T) {
	t.Parallel()
	skills := []a2a.AgentSkill{{ID: "math", Name: "Math", Description: "Sums", Tags: []string{"math"}}}
	b := setup(t, engine.Options{}, api.Options{A2ACards: map[string]protocols.A2ACard{"bob": {Name: "Bob", Description: "Counts.", Skills: skills}}})
	r := b.do("GET", "/v1/a2a/bob/.well-known/agent-card.json", b.alice, nil)
	sk, _ := r.body["skills"].([]any)
	if r.body["name"] != "Bob" || r.body["description"] != "Counts." || len(sk) != 1 || sk[0].(map[string]any)["id"] != "math" {
		t.Fatalf("card: %s", r.raw)
	}
	if r := b.do("GET", "/v1/a2a/carol/.well-known/agent-card.json", b.alice, nil); r.body["name"] != "carol" {
		t.Fatalf("an agent not configured: %s", r.raw)
	}
}

// a2aText is the text a client holds after a stream's events: a task
// event replaces it with the task's artifacts; artifact updates add to it.
func a2aText(t *testing.T, evs []chatEvent) string {
	t.Helper()
	texts := map[string]string{}
	var order []string
	put := func(id, text string, add bool) {
		if _, ok := texts[id]; !ok {
			order = append(order, id)
		}
		if add {
			texts[id] += text
		} else {
			texts[id] = text
		}
	}
	for _, ev := range evs {
		var env struct {
			Result struct {
				Task *struct {
					Artifacts []struct {
						ArtifactID string `json:"artifactId"`
						Parts      []struct {
							Text *string `json:"text"`
						} `json:"parts"`
					} `json:"artifacts"`
				} `json:"task"`
				ArtifactUpdate *struct {
					Artifact struct {
						ArtifactID string `json:"artifactId"`
						Parts      []struct {
							Text *string `json:"text"`
						} `json:"parts"`
					} `json:"artifact"`
					Append bool `json:"append"`
				} `json:"artifactUpdate"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
			t.Fatal(err)
		}
		if tk := env.Result.Task; tk != nil {
			texts, order = map[string]string{}, nil
			for _, a := range tk.Artifacts {
				if p := a.Parts[0]; p.Text != nil {
					put(a.ArtifactID, *p.Text, false)
				}
			}
		}
		if u := env.Result.ArtifactUpdate; u != nil && u.Artifact.Parts[0].Text != nil {
			put(u.Artifact.ArtifactID, *u.Artifact.Parts[0].Text, u.Append)
		}
	}
	var out []string
	for _, id := range order {
		out = append(out, texts[id])
	}
	return strings.Join(out, "|")
}

// TestA2AResumeAfterCompaction: once retention compacted the answer's
// deltas, a subscribe from a position at or after them gets the events
// after it as before, and one from before them gets the task as it
// stands (a task event) instead: never part of the text twice.
func TestA2AResumeAfterCompaction(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	run := b.runnerConn("c-1", b.bob)
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SendStreamingMessage", a2aMessage("m-1", "c-1", "What is 6 x 7?", nil))))
	until(t, b, run, "prompt")
	script(t, b, run, "r1", 0, len(scriptedAnswer))
	do(t, b, run, `{"type":"complete"}`)
	full := st.all()
	want := a2aText(t, full)
	sw := retention.New(b.db, retention.Options{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if n, err := sw.Pass(b.ctx); err != nil || n.Events == 0 {
		t.Fatalf("compaction: %+v, err %v", n, err)
	}
	whole, exact := 0, 0
	for i, ev := range full {
		rest := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SubscribeToTask", map[string]any{"id": "c-1~m-1"}), "Last-Event-ID", ev.id)).all()
		got := append(slices.Clone(full[:i+1]), rest...)
		if len(rest) > 0 && strings.HasPrefix(streamKinds(t, rest[:1]), "task ") {
			whole++
		} else {
			exact++
			// Deltas compacted after the position come as one: the same
			// text, cut otherwise.
			if k := streamKinds(t, got); !strings.HasSuffix(k, "status TASK_STATE_COMPLETED") || strings.Count(k, "task ") != 1 {
				t.Fatalf("resumed after %s:\n%s", ev.id, streamKinds(t, rest))
			}
		}
		if a2aText(t, got) != want {
			t.Fatalf("resumed after %s: the client holds %q, want %q", ev.id, a2aText(t, got), want)
		}
	}
	if whole == 0 || exact == 0 {
		t.Fatalf("%d resumes sent the task, %d went on exactly; want some of each", whole, exact)
	}
}

// TestA2ASubscribeLive: a subscribe that names no position gets the task
// as it stands (its artifacts so far), then what follows; a resume from
// that task event's id gets the same. A message answering the task's
// question as a stream gets the task, then the rest.
func TestA2ASubscribeLive(t *testing.T) {
	t.Parallel()
	f := newInputFixture(t, "t-l")
	b := f.bundle
	b.rpc("bob", b.alice, rpcCall("SendMessage", a2aMessage("m-1", "t-l", "Clean", map[string]any{"returnImmediately": true})))
	f.ask(t) // text, then a call, no request
	sub := events(t, b.postJSON("/v1/a2a/bob", b.viewer, rpcCall("SubscribeToTask", map[string]any{"id": "t-l~m-1"})))
	first, ok := sub.next()
	if k := streamKinds(t, []chatEvent{first}); !ok || k != "task TASK_STATE_WORKING" || a2aText(t, []chatEvent{first}) != "Cleaning. " {
		t.Fatalf("the first event of a live subscribe: %s %s", k, first.data)
	}
	do(t, b, f.run, `{"type":"message.part.input-request","turnId":"r1","requestId":"q-1","kind":"question","title":"Which?"}`)
	evs := sub.all()
	if k := streamKinds(t, evs); !strings.HasSuffix(k, "status TASK_STATE_INPUT_REQUIRED") {
		t.Fatalf("a live subscribe until the question:\n%s", k)
	}
	again := events(t, b.postJSON("/v1/a2a/bob", b.viewer, rpcCall("SubscribeToTask", map[string]any{"id": "t-l~m-1"}), "Last-Event-ID", first.id)).all()
	if streamKinds(t, again) != streamKinds(t, evs) {
		t.Fatalf("resumed after the task event:\n%s\nwant:\n%s", streamKinds(t, again), streamKinds(t, evs))
	}
	ans := a2aMessage("a-1", "", "Both", nil)
	ans["message"].(map[string]any)["taskId"] = "t-l~m-1"
	st := events(t, b.postJSON("/v1/a2a/bob", b.alice, rpcCall("SendStreamingMessage", ans)))
	head, _ := st.next()
	if k := streamKinds(t, []chatEvent{head}); k != "task TASK_STATE_WORKING" {
		t.Fatalf("the stream of an answer starts with %s", k)
	}
	f.finish(t, "q-1")
	if k := streamKinds(t, st.all()); !strings.HasSuffix(k, "artifact t3 \"Done.\"\nartifact t3 \"\" append last\nstatus TASK_STATE_COMPLETED") {
		t.Fatalf("the rest after the answer:\n%s", k)
	}
}

// TestA2AParleysOwnClient: the A2A client the bridge speaks with
// (a2a.Client), in both versions, from the card: a stream of the answer
// and the task read again.
func TestA2AParleysOwnClient(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	b.want(b.do("POST", "/v1/conversations", b.alice, map[string]any{"id": "c-1", "participants": []string{"bob"}}), 201, "")
	run := b.runnerConn("c-1", b.bob)
	header := http.Header{"Authorization": {"Bearer " + b.alice}}
	card, err := a2a.FetchCard(b.ctx, nil, b.url+"/v1/a2a/bob/"+a2a.CardPath, header, 0)
	if err != nil {
		t.Fatal(err)
	}
	ai, ok := a2a.JSONRPCInterface(card)
	if !ok || ai.URL != b.url+"/v1/a2a/bob" {
		t.Fatalf("the card's interface: %+v", card.SupportedInterfaces)
	}
	for i, version := range []string{a2a.ProtocolVersion, a2a.LegacyProtocolVersion} {
		c := &a2a.Client{URL: ai.URL, Version: version, Header: header}
		id := fmt.Sprintf("m-%d", i)
		st, err := c.SendStreamingMessage(b.ctx, &a2a.SendMessageRequest{Message: &a2a.Message{MessageID: id, ContextID: "c-1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("What is 6 x 7?")}}})
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		until(t, b, run, "prompt")
		script(t, b, run, "r"+id, 0, len(scriptedAnswer))
		do(t, b, run, `{"type":"complete"}`)
		var text string
		var last a2a.TaskState
		for {
			ev, err := st.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", version, err)
			}
			if u := ev.ArtifactUpdate; u != nil && u.Artifact.Parts[0].Text != nil {
				text += *u.Artifact.Parts[0].Text
			}
			if u := ev.StatusUpdate; u != nil {
				last = u.Status.State
			}
		}
		st.Close()
		if text != "Let me look.It is 42." || last != a2a.StateCompleted {
			t.Fatalf("%s: the stream's text %q, its last state %s", version, text, last)
		}
		task, err := c.GetTask(b.ctx, "c-1~"+id)
		if err != nil || task.Status.State != a2a.StateCompleted || len(task.Artifacts) != 3 {
			t.Fatalf("%s: GetTask %+v, %v", version, task, err)
		}
	}
}
