package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestTurnAbortStopsTheRunnerStreamingInIt: an admin's turns/abort of the
// turn a runner is answering a prompt in tells the runner (an abort frame
// for that prompt, as a stop does); the runner's aborted ends its message
// canceled, and the prompt ends canceled, not completed.
func TestTurnAbortStopsTheRunnerStreamingInIt(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice")
	base := "/v1/conversations/" + id
	run := b.runnerConn(id, b.alice)
	b.want(b.do("POST", base+"/prompts", b.admin, map[string]any{"agentId": "human", "id": "p1", "content": "go on"}), 201, "")
	until(t, b, run, "prompt")
	do(t, b, run, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, run, `{"type":"message.part.text-delta","turnId":"r1","delta":"streaming"}`)

	b.want(b.do("POST", base+"/turns/abort", b.admin, map[string]any{"agentId": "human", "reason": "taking over"}), 200, "")
	if f := until(t, b, run, "abort"); f["messageId"] != "p1" {
		t.Fatalf("abort frame = %v, want one for p1", f)
	}
	do(t, b, run, `{"type":"aborted","turnId":"r1"}`)

	r := b.do("GET", base+"/messages/r1", b.viewer, nil)
	if b.want(r, 200, ""); r.body["status"] != "canceled" || strings.Contains(string(r.raw), `"type":"error"`) {
		t.Fatalf("the message after its turn was aborted: %s", r.raw)
	}
	log := b.log(id)
	if !strings.Contains(log, `"type":"prompt.canceled"`) || strings.Contains(log, `"type":"prompt.completed"`) {
		t.Fatalf("the prompt did not end canceled: %s", log)
	}
	q := b.do("GET", base+"/prompts", b.viewer, nil)
	if b.want(q, 200, ""); len(q.body["prompts"].([]any)) != 0 {
		t.Fatalf("the queue still holds the prompt: %s", q.raw)
	}
}
