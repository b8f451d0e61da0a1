package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// failover is what the tests' runner streams for a prompt it answers
// twice: an attempt with text and a tool call, which fails over (an error
// that keeps the prompt), then the retry, which names it in retryOf.
var failover = []string{
	`{"type":"message.create","turnId":"r1"}`,
	`{"type":"message.part.text-delta","turnId":"r1","delta":"Let me "}`,
	`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"search","status":"running","args":{"q":"6x7"}}`,
	`{"type":"error","turnId":"r1","error":"the model's connection dropped","finality":"none"}`,
	`{"type":"message.create","turnId":"r2","retryOf":"r1"}`,
	`{"type":"message.part.text-delta","turnId":"r2","delta":"It is "}`,
	`{"type":"message.part.text-delta","turnId":"r2","delta":"42."}`,
	`{"type":"message.finalize","turnId":"r2","reason":"end_turn"}`,
	`{"type":"complete"}`,
}

// wantFailoverUI is the UI message stream of failover: one UI message, the
// first attempt's, its parts then the retry's, ending as the retry ends.
const wantFailoverUI = `start messageId="r1"
text-start id="t0"
text-delta id="t0" delta="Let me "
text-end id="t0"
tool-input-start id=... toolCallId="c1" toolName="search" providerExecuted=true
tool-input-available toolCallId="c1" toolName="search" input={"q":"6x7"} providerExecuted=true
tool-output-error toolCallId="c1" errorText="the response ended before the tool call finished" providerExecuted=true
text-start id="r1t0"
text-delta id="r1t0" delta="It is "
text-delta id="r1t0" delta="42."
text-end id="r1t0"
finish
[DONE]`

// TestChatFollowsAFailover: an answer whose runner fails over (ends its
// message with an error, keeps the prompt, and answers again in a message
// that names the failed one in retryOf) streams on into the retry, to the
// retry's end, with no error between: the person asked one question and
// its answer is the retry. A stream resumed between the failure and the
// retry says the same; and the AG-UI run of such an answer is the failed
// attempt's message, then the retry's, then RUN_FINISHED.
func TestChatFollowsAFailover(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	st := events(t, b.postJSON("/v1/chat", b.alice, chatBody("chat-f", "u1", "What is 6 x 7?", "to", "bob")))
	run := b.runnerConn("chat-f", b.bob)
	until(t, b, run, "prompt")
	for _, f := range failover[:4] {
		do(t, b, run, f)
	}
	resumed := events(t, b.send("GET", "/v1/chat/chat-f/stream", b.alice, nil))
	for _, f := range failover[4:] {
		do(t, b, run, f)
	}
	if got := uiStream(st.all()); got != wantFailoverUI {
		t.Fatalf("stream:\n%s\nwant:\n%s", got, wantFailoverUI)
	}
	if got := uiStream(resumed.all()); got != wantFailoverUI {
		t.Fatalf("resumed between the attempts:\n%s\nwant:\n%s", got, wantFailoverUI)
	}
	if m := b.do("GET", "/v1/conversations/chat-f/messages/r2", b.alice, nil); m.body["retryOf"] != "r1" || m.body["content"] != "It is 42." {
		t.Fatalf("the retry = %s", m.raw)
	}

	ag := events(t, b.postJSON("/v1/ag-ui", b.alice, runInput("chat-f", "run-2", "And again?", nil)))
	until(t, b, run, "prompt")
	for _, f := range failover {
		do(t, b, run, strings.NewReplacer(`"r1"`, `"r3"`, `"r2"`, `"r4"`).Replace(f))
	}
	want := `RUN_STARTED threadId="chat-f" runId="run-2"
TEXT_MESSAGE_START messageId="r3"
TEXT_MESSAGE_CONTENT messageId="r3" delta="Let me "
TEXT_MESSAGE_END messageId="r3"
TOOL_CALL_START toolCallId="c1" toolCallName="search" parentMessageId="r3"
TOOL_CALL_ARGS delta="{\"q\":\"6x7\"}" toolCallId="c1"
TOOL_CALL_END toolCallId="c1"
TOOL_CALL_RESULT messageId="r3:c1" toolCallId="c1" content="the response ended before the tool call finished"
TEXT_MESSAGE_START messageId="r4"
TEXT_MESSAGE_CONTENT messageId="r4" delta="It is "
TEXT_MESSAGE_CONTENT messageId="r4" delta="42."
TEXT_MESSAGE_END messageId="r4"
RUN_FINISHED threadId="chat-f" runId="run-2"`
	if got := aguiTypes(ag.all()); got != want {
		t.Fatalf("AG-UI run:\n%s\nwant:\n%s", got, want)
	}
}
