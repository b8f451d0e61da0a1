package protocols

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

// inputLog is the log of an answer that asks an approval of a tool call:
// text, the call, the approval, its answer, the call's outcome, more text.
func inputLog(answer string) []parley.Event {
	ev := func(seq int64, typ, data string) parley.Event {
		return parley.Event{Seq: seq, Type: typ, Data: json.RawMessage(data)}
	}
	return []parley.Event{
		ev(1, parley.EventMessage, `{"id":"a1","role":"assistant","agentId":"helper","replyTo":"q1","status":"streaming","parts":[]}`),
		ev(2, parley.EventChunk, `{"messageId":"a1","content":"Let me clean. "}`),
		ev(3, parley.EventPartUpdated, `{"messageId":"a1","part":{"type":"tool-call","callId":"c1","toolName":"bash","status":"pending","args":{"command":"rm -rf build"}}}`),
		ev(4, parley.EventPartUpdated, `{"messageId":"a1","part":{"type":"input-request","requestId":"r1","kind":"approval","toolCallId":"c1","toolName":"bash","title":"Run it?","status":"pending"}}`),
		ev(5, eventInputAnswered, `{"messageId":"a1","requestId":"r1","status":"answered","answer":`+answer+`,"answeredBy":"you"}`),
		ev(6, parley.EventPartUpdated, `{"messageId":"a1","part":{"type":"tool-call","callId":"c1","status":"completed","result":"ok"}}`),
		ev(7, parley.EventChunk, `{"messageId":"a1","content":"Done."}`),
		ev(8, parley.EventMessageUpdated, `{"id":"a1","role":"assistant","agentId":"helper","replyTo":"q1","status":"completed","content":"Let me clean. Done.","parts":[{"type":"text","text":"Let me clean. "},{"type":"tool-call","callId":"c1","toolName":"bash","status":"completed","args":{"command":"rm -rf build"},"result":"ok"},{"type":"input-request","requestId":"r1","kind":"approval","toolCallId":"c1","status":"answered","answer":`+answer+`},{"type":"text","text":"Done."}]}`),
	}
}

// chunkTypes folds events into a new answer to q1 and returns, per event,
// the UI message stream chunks (their type, and a data part's status).
func chunkTypes(events []parley.Event, skip *skipper) [][]string {
	a := newAnswer("q1")
	var out [][]string
	for _, ev := range events {
		var got []string
		for _, st := range a.apply(ev, nil) {
			if !skip.pass(&st) {
				continue
			}
			for _, c := range uiChunks(&st) {
				var m struct {
					Type string `json:"type"`
					Data struct {
						Status string `json:"status"`
					} `json:"data"`
				}
				_ = json.Unmarshal(c, &m)
				got = append(got, strings.TrimSuffix(m.Type+":"+m.Data.Status, ":"))
			}
		}
		skip.next()
		out = append(out, got)
	}
	return out
}

// TestApprovalChunks: an approval is a data part and, after its call's
// input, the SDK's tool-approval-request; the text before it ends there,
// and the text after it is a part of its own. A denial is
// tool-output-denied, and the call's later outcome is not sent.
func TestApprovalChunks(t *testing.T) {
	got := chunkTypes(inputLog(`{"approved":true}`), nil)
	want := [][]string{
		{"start"},
		{"text-start", "text-delta"},
		{"text-end", "tool-input-start", "tool-input-available"},
		{"data-input-request:pending", "tool-approval-request"},
		{"data-input-request:answered"},
		{"tool-output-available"},
		{"text-start", "text-delta"},
		{"text-end", "finish"},
	}
	if !equal(got, want) {
		t.Fatalf("approved:\n got %v\nwant %v", got, want)
	}
	got = chunkTypes(inputLog(`{"approved":false,"reason":"no"}`), nil)
	want[4] = []string{"data-input-request:answered", "tool-output-denied"}
	want[5] = nil
	if !equal(got, want) {
		t.Fatalf("denied:\n got %v\nwant %v", got, want)
	}
}

// TestSkipperGoesOnAfterThePause: a stream that goes on after an approval
// sends the answer's start, then only what follows the event that opened
// the approval.
func TestSkipperGoesOnAfterThePause(t *testing.T) {
	got := chunkTypes(inputLog(`{"approved":true}`), newSkipper([]string{"r1"}))
	want := [][]string{{"start"}, nil, nil, nil, {"data-input-request:answered"}, {"tool-output-available"}, {"text-start", "text-delta"}, {"text-end", "finish"}}
	if !equal(got, want) {
		t.Fatalf("\n got %v\nwant %v", got, want)
	}
}

// TestApprovalBringsItsCall: an approval of a call the message does not
// hold yet brings the call first; the call, written later, is not started
// again.
func TestApprovalBringsItsCall(t *testing.T) {
	log := inputLog(`{"approved":true}`)
	log = append(log[:2:2], log[3:]...) // no tool-call part before the approval
	got := chunkTypes(log, nil)
	want := [][]string{
		{"start"},
		{"text-start", "text-delta"},
		{"text-end", "tool-input-start", "tool-input-available", "data-input-request:pending", "tool-approval-request"},
		{"data-input-request:answered"},
		{"tool-output-available"},
		{"text-start", "text-delta"},
		{"text-end", "finish"},
	}
	if !equal(got, want) {
		t.Fatalf("\n got %v\nwant %v", got, want)
	}
}

// TestResponseSchema: an interrupt's schema is the request's own, else the
// one its kind implies.
func TestResponseSchema(t *testing.T) {
	for _, c := range []struct {
		r    inputReq
		want string
	}{
		{inputReq{Kind: inputApproval}, `"approved"`},
		{inputReq{Kind: inputQuestion}, `"text"`},
		{inputReq{Kind: inputQuestion, Options: json.RawMessage(`[{"label":"A"},{"label":"B"}]`)}, `"enum":["A","B"]`},
		{inputReq{Kind: inputQuestion, Schema: json.RawMessage(`{"type":"integer"}`)}, `"integer"`},
	} {
		if got := string(responseSchema(&c.r)); !strings.Contains(got, c.want) || !json.Valid([]byte(got)) {
			t.Errorf("%+v: %s, want it to hold %s", c.r, got, c.want)
		}
	}
}

func equal(a, b [][]string) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestCallOfAnApprovalEnds: a call an approval brought, that the message
// never holds, ends with an error as the answer ends (a page's tool part
// is not left approval-responded).
func TestCallOfAnApprovalEnds(t *testing.T) {
	log := inputLog(`{"approved":true}`)
	log = append(log[:2:2], log[3], log[4], log[6]) // no tool-call part ever
	log = append(log, parley.Event{Seq: 9, Type: parley.EventMessageUpdated, Data: json.RawMessage(`{"id":"a1","role":"assistant","agentId":"helper","replyTo":"q1","status":"completed","content":"Let me clean. Done.","parts":[{"type":"text","text":"Let me clean. "},{"type":"input-request","requestId":"r1","kind":"approval","toolCallId":"c1","status":"answered","answer":{"approved":true}},{"type":"text","text":"Done."}]}`)})
	got := chunkTypes(log, nil)
	if last := got[len(got)-1]; !equal([][]string{last}, [][]string{{"text-end", "tool-output-error", "finish"}}) {
		t.Fatalf("the answer ended with %v", got)
	}
}
