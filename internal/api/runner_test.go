package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
)

// runnerConn dials the runner WebSocket with a token.
func (b *bundle) runnerConn(id, token string) *websocket.Conn {
	b.t.Helper()
	u := "ws" + strings.TrimPrefix(b.url, "http") + "/v1/conversations/" + id + "/runner"
	c, _, err := websocket.Dial(b.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { c.CloseNow() })
	return c
}

// send writes one runner frame and returns the server's reply.
func send(t *testing.T, b *bundle, c *websocket.Conn, frame string) map[string]any {
	t.Helper()
	if err := c.Write(b.ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	return readFrame(t, b.ctx, c)
}

// TestRunnerStreamsOneMessage: text → tool (running, completed) → text →
// finalize over the runner protocol gives one message with parts
// [text, tool-call, text, finish], every frame acknowledged with its seq, and
// subscribers see message, chunk, part.updated and message.updated.
func TestRunnerStreamsOneMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	watch := b.dialWS(id, "")
	readFrame(t, b.ctx, watch) // init
	c := b.runnerConn(id, b.alice)
	frames := []string{
		`{"type":"message.create","turnId":"r1","opencodeSessionId":"ses_1"}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"Let me check. "}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"search","status":"running","args":{"q":"x"}}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"search","status":"completed","result":"found"}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"Found it."}`,
		`{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"Let me check. Found it."}`,
	}
	for i, f := range frames {
		ack := send(t, b, c, f)
		if ack["type"] != "ack" || ack["seq"] != float64(i+2) {
			t.Fatalf("frame %d answered %v", i, ack)
		}
	}
	r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
	b.want(r, 200, "")
	var kinds []string
	for _, p := range r.body["parts"].([]any) {
		kinds = append(kinds, p.(map[string]any)["type"].(string))
	}
	if strings.Join(kinds, ",") != "text,tool-call,text,finish" || r.body["content"] != "Let me check. Found it." || r.body["status"] != "complete" {
		t.Fatalf("message = %s", r.raw)
	}
	var seen []string
	for len(seen) < 6 {
		f := readFrame(t, b.ctx, watch)
		if f["type"] != "guidance" {
			seen = append(seen, f["type"].(string))
		}
	}
	if strings.Join(seen, ",") != "message,chunk,part.updated,part.updated,chunk,message.updated" {
		t.Fatalf("subscriber saw %v", seen)
	}
	// The next turn is open to others: the response closed alice's turn.
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", b.bob, map[string]any{"content": "thanks"}), 201, "")
}

func TestRunnerAbortErrorAndRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	c := b.runnerConn(id, b.alice)
	send(t, b, c, `{"type":"message.create","turnId":"a1"}`)
	send(t, b, c, `{"type":"message.part.text-delta","turnId":"a1","delta":"partial"}`)
	if ack := send(t, b, c, `{"type":"aborted"}`); ack["type"] != "ack" {
		t.Fatalf("aborted: %v", ack)
	}
	r := b.do("GET", "/v1/conversations/"+id+"/messages/a1", b.viewer, nil)
	if r.body["status"] != "canceled" {
		t.Fatalf("aborted message = %s", r.raw)
	}
	send(t, b, c, `{"type":"message.create","turnId":"a2"}`)
	send(t, b, c, `{"type":"error","error":"model overloaded","finality":"none"}`)
	r = b.do("GET", "/v1/conversations/"+id+"/messages/a2", b.viewer, nil)
	parts := r.body["parts"].([]any)
	if r.body["status"] != "error" || parts[0].(map[string]any)["message"] != "model overloaded" {
		t.Fatalf("failed message = %s", r.raw)
	}
	// Failover: the failed message stays and a new one follows in the same turn.
	send(t, b, c, `{"type":"message.create","turnId":"a3"}`)
	if ack := send(t, b, c, `{"type":"message.finalize","turnId":"a3","reason":"end_turn"}`); ack["type"] != "ack" {
		t.Fatalf("retry: %v", ack)
	}
	for frame, code := range map[string]string{
		`{"type":"message.part.text-delta","turnId":"nope","delta":"x"}`: "not_found",
		`{"type":"teleport"}`:                     "invalid_value",
		`{"type":"message.create","turnId":"a1"}`: "busy",
		`{"type":`: "invalid_request",
		`{"type":"message.create","turnId":"a9","colour":"red"}`: "invalid_request",
	} {
		reply := send(t, b, c, frame)
		if reply["type"] != "error" || reply["error"].(map[string]any)["code"] != code {
			t.Fatalf("%s answered %v, want error %s", frame, reply, code)
		}
	}
	// Another agent cannot write to alice's message.
	other := b.runnerConn(id, b.bob)
	send(t, b, c, `{"type":"message.create","turnId":"a4"}`)
	reply := send(t, b, other, `{"type":"message.part.text-delta","turnId":"a4","delta":"x"}`)
	if reply["error"].(map[string]any)["code"] != "forbidden" {
		t.Fatalf("bob writing to alice's message: %v", reply)
	}
	// A viewer cannot run an agent.
	u := "ws" + strings.TrimPrefix(b.url, "http") + "/v1/conversations/" + id + "/runner"
	_, resp, err := websocket.Dial(b.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.viewer}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("viewer runner: %v %v", err, resp)
	}
}

// TestRunnerReconnectsAndAsksForItsMessage: a runner that lost its
// connection asks for the state of its message and continues it; readers of
// the unfinished message get its row plus the chunks after it; a failover
// retry names the message it replaces.
func TestRunnerReconnectsAndAsksForItsMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	c := b.runnerConn(id, b.alice)
	send(t, b, c, `{"type":"message.create","turnId":"r1"}`)
	send(t, b, c, `{"type":"message.part.text-delta","turnId":"r1","delta":"first "}`)
	send(t, b, c, `{"type":"message.part.text-delta","turnId":"r1","delta":"half"}`)
	r := b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
	if r.body["content"] != "first half" || r.body["status"] != "streaming" {
		t.Fatalf("reading the unfinished message = %s", r.raw)
	}
	c.CloseNow()

	again := b.runnerConn(id, b.alice)
	st := send(t, b, again, `{"type":"message.state","turnId":"r1"}`)
	m, _ := st["message"].(map[string]any)
	if st["type"] != "ack" || m["content"] != "first half" || m["status"] != "streaming" {
		t.Fatalf("message.state answered %v", st)
	}
	send(t, b, again, `{"type":"message.part.text-delta","turnId":"r1","delta":", then the rest"}`)
	send(t, b, again, `{"type":"error","error":"provider down","finality":"none"}`)
	if ack := send(t, b, again, `{"type":"message.create","turnId":"r2","retryOf":"r1"}`); ack["type"] != "ack" {
		t.Fatalf("retry: %v", ack)
	}
	send(t, b, again, `{"type":"message.finalize","turnId":"r2","reason":"end_turn"}`)
	r = b.do("GET", "/v1/conversations/"+id+"/messages/r1", b.viewer, nil)
	if r.body["content"] != "first half, then the rest" || r.body["status"] != "error" {
		t.Fatalf("failed message = %s", r.raw)
	}
	r = b.do("GET", "/v1/conversations/"+id+"/messages/r2", b.viewer, nil)
	if r.body["retryOf"] != "r1" || r.body["status"] != "complete" {
		t.Fatalf("retry message = %s", r.raw)
	}
	other := b.runnerConn(id, b.bob)
	if reply := send(t, b, other, `{"type":"message.state","turnId":"r1"}`); reply["type"] != "error" {
		t.Fatalf("another agent read alice's message state: %v", reply)
	}
}

// TestOutboxHandsAnswersOver: a runner connection's reader queues the
// answer of each delta while it is still being written, and the outbox's
// writer takes it and waits on it once it is known. The reader must not
// look at an answer once it is queued: the writer may be waiting on it
// (an Ack is for one goroutine at a time). The race detector (go test
// -race, which scripts/test runs) fails this test when the reader does:
// here the reader waits for each answer to be written and tells the
// writer nothing meanwhile, as a runner waiting for its ack does. (Over a
// real connection the detector did not see that race, the socket's own
// locking ordering the two goroutines for it: a chaos run found it by
// crashing the server.)
func TestOutboxHandsAnswersOver(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id, alice := b.conversation("alice"), conv.Actor{AgentID: "alice"}
	if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: alice, ID: "m", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	written := make(chan []byte, 1)
	queue := api.NewOutbox(func(frame []byte) { written <- frame })
	f := &runners.Frame{Type: "message.part.text-delta", TurnID: "m"}
	for range 50 {
		if !queue(f, b.eng.StreamTextAsync(b.ctx, id, conv.StreamText{Actor: alice, MessageID: "m", Delta: "x"})) {
			t.Fatal("the outbox closed")
		}
		select {
		case frame := <-written:
			if !strings.HasPrefix(string(frame), `{"seq":`) {
				t.Fatalf("the answer of a delta: %s", frame)
			}
		case <-b.ctx.Done():
			t.Fatal("an answer was never written")
		}
	}
}
