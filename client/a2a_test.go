package client_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestServeA2AStreamsEachAnswer: the card's JSON-RPC interface of A2A
// 1.0 is chosen among others; each prompt is streamed
// (SendStreamingMessage, A2A-Version 1.0, the token sent); the artifact's
// chunks make one message; the second prompt goes in the context the
// first answer named, and its answer, given only in the completed
// status's message, is its text.
func TestServeA2AStreamsEachAnswer(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, true,
		a2aTurn{events: []string{
			`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}`,
			`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"s1","role":"ROLE_AGENT","parts":[{"text":"Thinking…"}]}}}}`,
			`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"Hello, "}]}}}`,
			`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"world."}]},"append":true,"lastChunk":true}}`,
			`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"s2","role":"ROLE_AGENT","parts":[{"text":"Hello, world."}]}}}}`,
		}},
		a2aTurn{events: []string{
			`{"task":{"id":"t2","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"statusUpdate":{"taskId":"t2","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"s3","role":"ROLE_AGENT","parts":[{"text":"Still here."}]}}}}`,
		}},
	)
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{Token: "remote-secret"})
	for _, p := range []string{"Say hello.", "Are you there?"} {
		if _, err := c.Ask(ctx, id, "human", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := stop(2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed prompt.completed",
		"complete | text=Hello, world. | finish(end_turn)",
		"complete | text=Still here. | finish(end_turn)")
	sends := f.sent("SendStreamingMessage")
	if len(sends) != 2 {
		t.Fatalf("%d streamed sends, want 2", len(sends))
	}
	for i, want := range []struct{ text, context string }{{"Say hello.", ""}, {"Are you there?", "c1"}} {
		m := sends[i].message(t)
		if m.Role != "ROLE_USER" || len(m.Parts) != 1 || m.Parts[0].Text != want.text || m.ContextID != want.context || m.TaskID != "" {
			t.Errorf("send %d: message %+v, want the text %q in context %q", i, m, want.text, want.context)
		}
		if sends[i].Version != "1.0" || sends[i].Auth != "Bearer remote-secret" {
			t.Errorf("send %d: A2A-Version %q, Authorization %q", i, sends[i].Version, sends[i].Auth)
		}
	}
	if cards := f.sent("card"); len(cards) != 1 || cards[0].Auth != "Bearer remote-secret" {
		t.Errorf("card fetches %+v, want one with the token", cards)
	}
}

// TestServeA2AAnswersWithAMessage: an agent that does not stream is sent
// SendMessage; its answer, a Message, is the text (a data part as a JSON
// code block).
func TestServeA2AAnswersWithAMessage(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, false, a2aTurn{events: []string{
		`{"message":{"messageId":"m1","contextId":"c9","role":"ROLE_AGENT","parts":[{"text":"The total:"},{"data":{"sum":3}}]}}`,
	}})
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Add 1 and 2.", ""); err != nil {
		t.Fatal(err)
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed",
		"complete | text=The total:\n```json\n{\n  \"sum\": 3\n}\n```\n | finish(end_turn)")
	if sends := f.sent("SendMessage"); len(sends) != 1 || sends[0].message(t).Parts[0].Text != "Add 1 and 2." {
		t.Errorf("SendMessage calls %+v, want one with the prompt", sends)
	}
}

// TestServeA2AFailedTask: a task that fails ends the message with an
// error part saying why, after the text streamed before.
func TestServeA2AFailedTask(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, true, a2aTurn{events: []string{
		`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"Partial answer"}]}}}`,
		`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"s1","role":"ROLE_AGENT","parts":[{"text":"out of credits"}]}}}}`,
	}})
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Go.", ""); err != nil {
		t.Fatal(err)
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed",
		"error | text=Partial answer | error=the A2A agent failed: out of credits | finish(error)")
}

// TestServeA2AStopCancelsTheTask: a stop in Parley cancels the remote task
// (CancelTask with its id) and ends the message canceled, with what the
// agent said until then.
func TestServeA2AStopCancelsTheTask(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, true, a2aTurn{hold: true, events: []string{
		`{"task":{"id":"t7","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`,
		`{"artifactUpdate":{"taskId":"t7","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"Counting: 1, 2"}]}}}`,
	}})
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Count forever.", ""); err != nil {
		t.Fatal(err)
	}
	<-f.holding
	waitForText(ctx, t, c, id, "Counting: 1, 2")
	if err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case task := <-f.canceled:
		if task != "t7" {
			t.Errorf("CancelTask of %q, want t7", task)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the remote task was not canceled")
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.canceled", "canceled | text=Counting: 1, 2 | finish(canceled)")
}

// waitForText waits until the bridged agent's message has text.
func waitForText(ctx context.Context, t *testing.T, c *client.Client, id, text string) {
	t.Helper()
	for ctx.Err() == nil {
		msgs, err := c.AllMessages(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.AgentID == "a2a" && m.Content == text {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no message says %q", text)
}

// TestServeA2AAsksForInput: a task that needs input has its status
// message asked in Parley; the answer a person gives over HTTP goes back
// to the agent in the same task and context, and its answer streams into
// the same message; the task as it stood, which the agent sends first
// again, is not taken for a new question.
func TestServeA2AAsksForInput(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, true,
		a2aTurn{events: []string{
			`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}`,
			`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"q1","role":"ROLE_AGENT","parts":[{"text":"Which color?"}]}}}}`,
		}},
		a2aTurn{events: []string{
			// The task as it stood, first (as @a2a-js/sdk sends it): not a new question.
			`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"q1","role":"ROLE_AGENT","parts":[{"text":"Which color?"}]}}}}`,
			`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"Blue it is."}]}}}`,
			`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`,
		}},
	)
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Paint it.", ""); err != nil {
		t.Fatal(err)
	}
	// Each wait is bounded well within the test's context: a bridge that
	// asks nothing, or asks again, fails at once and says so.
	deadline := time.Now().Add(20 * time.Second)
	var asked []parley.Input
	for len(asked) == 0 && time.Now().Before(deadline) {
		var err error
		if asked, err = c.Inputs(ctx, id, "pending"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(asked) != 1 || asked[0].Title != "Which color?" || asked[0].Kind != parley.InputQuestion || asked[0].AgentID != "a2a" {
		t.Fatalf("pending inputs %+v, want the agent's question", asked)
	}
	if _, err := c.AnswerInput(ctx, id, asked[0].RequestID, "human", map[string]string{"text": "blue"}); err != nil {
		t.Fatal(err)
	}
	// A bridge that took the task sent again for a new question would ask
	// again (and again, at each answer): fail at once if it asks a second
	// time, or if the answer does not stream within the bound.
	deadline = time.Now().Add(20 * time.Second)
	for {
		n, text := a2aAsked(ctx, t, c, id)
		if n != 1 {
			t.Fatalf("the agent's question was asked %d times, want once", n)
		}
		if text == "Blue it is." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20s after the answer, the bridged message says %q, want the agent's answer", text)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed", "complete | text=Blue it is. | finish(end_turn)")
	if n, _ := a2aAsked(ctx, t, c, id); n != 1 {
		t.Fatalf("the agent's question was asked %d times, want once", n)
	}
	sends := f.sent("SendStreamingMessage")
	if len(sends) != 2 {
		t.Fatalf("%d sends, want 2", len(sends))
	}
	if m := sends[1].message(t); m.TaskID != "t1" || m.ContextID != "c1" || len(m.Parts) != 1 || m.Parts[0].Text != "blue" {
		t.Errorf("the answer was sent as %+v, want blue in task t1, context c1", m)
	}
}

// a2aAsked counts the input requests the bridged agent's messages hold,
// and returns their text so far.
func a2aAsked(ctx context.Context, t *testing.T, c *client.Client, id string) (int, string) {
	t.Helper()
	msgs, err := c.AllMessages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, text := 0, ""
	for _, m := range msgs {
		if m.AgentID != "a2a" {
			continue
		}
		text += m.Content
		for _, p := range m.Parts {
			if p.Type == parley.PartInputRequest {
				n++
			}
		}
	}
	return n, text
}

// TestServeA2ALegacyAgent: an agent of A2A 0.3 (its card has a url and no
// supportedInterfaces) is sent 0.3's message/stream, with 0.3's JSON and
// no A2A-Version, and its 0.3 events make the answer; a stop cancels with
// tasks/cancel.
func TestServeA2ALegacyAgent(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, true, true,
		a2aTurn{events: []string{
			`{"kind":"task","id":"t1","contextId":"c1","status":{"state":"submitted"}}`,
			`{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"Old "}]}}`,
			`{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"but gold."}]},"append":true}`,
			`{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"completed"},"final":true}`,
		}},
		a2aTurn{hold: true, events: []string{
			`{"kind":"status-update","taskId":"t2","contextId":"c1","status":{"state":"working","message":{"kind":"message","messageId":"s","role":"agent","parts":[{"kind":"text","text":"On it"}]}},"final":false}`,
			`{"kind":"artifact-update","taskId":"t2","contextId":"c1","artifact":{"artifactId":"a2","parts":[{"kind":"text","text":"Long"}]}}`,
		}},
	)
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Hi.", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ask(ctx, id, "human", "Go on.", ""); err != nil {
		t.Fatal(err)
	}
	<-f.holding
	waitForText(ctx, t, c, id, "Long")
	if err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if task := <-f.canceled; task != "t2" {
		t.Errorf("tasks/cancel of %q, want t2", task)
	}
	if err := stop(2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed prompt.canceled",
		"complete | text=Old but gold. | finish(end_turn)", "canceled | text=Long | finish(canceled)")
	sends := f.sent("message/stream")
	if len(sends) != 2 {
		t.Fatalf("%d message/stream calls, want 2", len(sends))
	}
	m := sends[1].message(t)
	if m.Kind != "message" || m.Role != "user" || m.ContextID != "c1" || m.Parts[0].Kind != "text" || m.Parts[0].Text != "Go on." {
		t.Errorf("the second prompt was sent as %+v", m)
	}
	if sends[0].Version != "" {
		t.Errorf("a 0.3 agent was sent A2A-Version %q", sends[0].Version)
	}
	if len(f.sent("tasks/cancel")) != 1 {
		t.Errorf("calls %+v, want one tasks/cancel", f.calls)
	}
}

// TestConnectA2ARefusesACardWithoutJSONRPC: a card whose interfaces are
// not JSON-RPC is refused before anything is served.
func TestConnectA2ARefusesACardWithoutJSONRPC(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"name":"Agent","supportedInterfaces":[{"url":"http://x/","protocolBinding":"GRPC","protocolVersion":"1.0"}]}`)
	}))
	t.Cleanup(srv.Close)
	if _, err := client.ConnectA2A(context.Background(), client.A2AOptions{URL: srv.URL}); !errors.Is(err, client.ErrNoA2AInterface) {
		t.Errorf("ConnectA2A returned %v, want ErrNoA2AInterface", err)
	}
	a, err := client.ConnectA2A(context.Background(), client.A2AOptions{URL: "http://127.0.0.1:1"})
	if err == nil {
		t.Errorf("ConnectA2A of nothing returned %+v", a)
	}
}

// ExampleServeA2A answers the prompts of every conversation agent
// "researcher" takes part in with a remote A2A agent (it is compiled, not
// run).
func ExampleServeA2A() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:7700", "") // an agent token, or "" on an open server
	r, err := c.ConnectAgentRunner(ctx, "researcher")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	err = client.ServeA2A(ctx, r, client.A2AOptions{URL: "https://agents.example.com/research", Token: "REMOTE_TOKEN"})
	log.Print(err) // ctx ended, the runner was closed or ended, or the agent card could not be read
}

// TestServeA2AUnansweredQuestionCancelsTheTask: a question no one answers
// within InputTimeout expires; the remote task is canceled and the answer
// ends with an error saying so.
func TestServeA2AUnansweredQuestionCancelsTheTask(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, true, a2aTurn{events: []string{
		`{"task":{"id":"t3","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"q1","role":"ROLE_AGENT","parts":[{"text":"Proceed?"}]}}}}`,
	}})
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{InputTimeout: time.Second})
	if _, err := c.Ask(ctx, id, "human", "Deploy.", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case task := <-f.canceled:
		if task != "t3" {
			t.Errorf("CancelTask of %q, want t3", task)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the remote task was not canceled when the question expired")
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed", "error | error=no one answered the A2A agent's question in time | finish(error)")
	ins, err := c.Inputs(ctx, id, "open")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.Status != parley.InputStatusExpired {
			t.Errorf("input %s is %s, want expired", in.RequestID, in.Status)
		}
	}
}

// TestServeA2AStopBeforeTheTaskIsNamed: a stop that comes before the
// agent's stream named its task keeps the stream open a little longer, to
// learn the task and cancel it; the prompt ends canceled with no message.
func TestServeA2AStopBeforeTheTaskIsNamed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFakeA2A(t, false, true, a2aTurn{wait: release, hold: true, events: []string{
		`{"task":{"id":"t9","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}`,
	}})
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Slow start.", ""); err != nil {
		t.Fatal(err)
	}
	<-f.holding // the stream is open, no event sent yet
	if err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the bridge hears of the stop
	close(release)
	select {
	case task := <-f.canceled:
		if task != "t9" {
			t.Errorf("CancelTask of %q, want t9", task)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the remote task was not canceled")
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.canceled")
}

// TestServeA2AAgentCancels: a task the agent cancels on its own ends the
// message canceled, as a stop does, with what it said; a second artifact
// is told apart from the first by a blank line, and the task's snapshot
// repeating the first adds nothing.
func TestServeA2AAgentCancels(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, true, a2aTurn{events: []string{
		`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"text":"First."}]}}}`,
		`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a2","parts":[{"text":"Second"}]}}}`,
		`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"artifactId":"a1","parts":[{"text":"First."}]},{"artifactId":"a2","parts":[{"text":"Second, whole."}]}]}}`,
		`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_CANCELED"}}}`,
	}})
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Go.", ""); err != nil {
		t.Fatal(err)
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.canceled", "canceled | text=First.\n\nSecond, whole. | finish(canceled)")
}

// TestServeA2AFollowsATaskLeftAtWork: a blocking send the agent answers
// with a task still at work is followed with GetTask until it completes;
// the artifact of each snapshot is written once.
func TestServeA2AFollowsATaskLeftAtWork(t *testing.T) {
	t.Parallel()
	f := newFakeA2A(t, false, false, a2aTurn{events: []string{
		`{"task":{"id":"t5","contextId":"c5","status":{"state":"TASK_STATE_WORKING"}}}`,
	}})
	f.got = []string{
		`{"id":"t5","contextId":"c5","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"artifactId":"a","parts":[{"text":"Half"}]}]}`,
		`{"id":"t5","contextId":"c5","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":"Half and whole."}]}]}`,
	}
	c, ctx, id, stop := serveA2A(t, f, client.A2AOptions{})
	if _, err := c.Ask(ctx, id, "human", "Take your time.", ""); err != nil {
		t.Fatal(err)
	}
	if err := stop(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeA2A returned %v, want context.Canceled", err)
	}
	checkA2ARun(ctx, t, c, id, "prompt.completed", "complete | text=Half and whole. | finish(end_turn)")
	gets := f.sent("GetTask")
	if len(gets) != 2 || !strings.Contains(string(gets[0].Params), `"id":"t5"`) {
		t.Errorf("GetTask calls %+v, want two of t5", gets)
	}
}
