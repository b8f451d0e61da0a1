package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// replay feeds recorded OpenCode events (one JSON object a line, written
// from OpenCode's published event types) through the adapter into a real
// server, and returns the message it made.
func replay(t *testing.T, recorded string, abort bool) *parley.Message {
	t.Helper()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ConnectRunner(ctx, v.Conversation.ID, "opencode")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := &client.OpenCodeAdapter{Runner: r, SessionID: "ses_1"}
	for _, line := range strings.Split(strings.TrimSpace(recorded), "\n") {
		var ev client.OpenCodeEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("recorded event %q: %v", line, err)
		}
		if err := a.Handle(ctx, ev); err != nil {
			t.Fatalf("handling %s: %v", line, err)
		}
	}
	if abort {
		if err := a.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evs, _, err := c.Events(ctx, v.Conversation.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == parley.EventMessage {
			var m parley.Message
			_ = json.Unmarshal(e.Data, &m)
			got, err := c.Message(context.Background(), v.Conversation.ID, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
	}
	t.Fatal("the adapter made no message")
	return nil
}

func kinds(m *parley.Message) string {
	var k []string
	for _, p := range m.Parts {
		k = append(k, p.Type)
	}
	return strings.Join(k, ",")
}

func TestOpenCodeSnapshotsBecomeDeltas(t *testing.T) {
	t.Parallel()
	m := replay(t, `
{"type":"message.part.updated","properties":{"part":{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"step-start"}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_2","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"I'll"}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_2","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"I'll search."}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_3","sessionID":"ses_1","messageID":"msg_1","type":"tool","callID":"call_1","tool":"grep","state":{"status":"pending"}}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_3","sessionID":"ses_1","messageID":"msg_1","type":"tool","callID":"call_1","tool":"grep","state":{"status":"running","input":{"pattern":"x"}}}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_3","sessionID":"ses_1","messageID":"msg_1","type":"tool","callID":"call_1","tool":"grep","state":{"status":"running","input":{"pattern":"x"}}}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_3","sessionID":"ses_1","messageID":"msg_1","type":"tool","callID":"call_1","tool":"grep","state":{"status":"completed","input":{"pattern":"x"},"output":"3 matches"}}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_9","sessionID":"ses_other","messageID":"msg_9","type":"text","text":"not ours"}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_4","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"Found"}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_4","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"Found 3."},"delta":" 3."}}
{"type":"session.idle","properties":{"sessionID":"ses_1"}}
`, false)
	if kinds(m) != "text,tool-call,text,finish" || m.Content != "I'll search.Found 3." || m.Status != parley.StatusComplete {
		t.Fatalf("message: parts %s, content %q, status %s", kinds(m), m.Content, m.Status)
	}
	tool := m.Parts[1]
	if tool.Status != parley.ToolCompleted || tool.ToolName != "grep" || string(tool.Args) != `{"pattern":"x"}` || string(tool.Result) != `"3 matches"` {
		t.Fatalf("tool part = %+v", tool)
	}
}

func TestOpenCodeDeltasPassThroughAndWaitForTheirPart(t *testing.T) {
	t.Parallel()
	m := replay(t, `
{"type":"message.part.delta","properties":{"sessionID":"ses_1","messageID":"msg_1","partID":"prt_1","field":"text","delta":"Hel"}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"Hel"}}}
{"type":"message.part.delta","properties":{"sessionID":"ses_1","messageID":"msg_1","partID":"prt_1","field":"text","delta":"lo"}}
{"type":"message.part.delta","properties":{"sessionID":"ses_1","messageID":"msg_1","partID":"prt_1","field":"text","delta":" world"}}
{"type":"session.idle","properties":{"sessionID":"ses_1"}}
`, false)
	if m.Content != "Hello world" || kinds(m) != "text,finish" {
		t.Fatalf("message: parts %s, content %q", kinds(m), m.Content)
	}
}

func TestOpenCodeAbortFinalizesCanceled(t *testing.T) {
	t.Parallel()
	m := replay(t, `
{"type":"message.part.updated","properties":{"part":{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"Working on"}}}
{"type":"message.part.updated","properties":{"part":{"id":"prt_2","sessionID":"ses_1","messageID":"msg_1","type":"tool","callID":"call_1","tool":"bash","state":{"status":"running","input":{"command":"sleep 100"}}}}}
`, true)
	if m.Status != parley.StatusCanceled || kinds(m) != "text,tool-call,finish" || m.Parts[1].Status != parley.ToolError {
		t.Fatalf("aborted message: parts %s, status %s, tool %s", kinds(m), m.Status, m.Parts[1].Status)
	}
}

// TestOpenCodeEndsThePromptWhenNothingWasSaid: a session that goes idle, or
// is aborted, before it said anything still ends the prompt it was given,
// so the queue moves on.
func TestOpenCodeEndsThePromptWhenNothingWasSaid(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "opencode")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := &client.OpenCodeAdapter{Runner: r, SessionID: "ses_1"}
	for _, p := range []string{"first", "second"} {
		if _, err := c.Prompt(ctx, id, "human", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	next := func(want string) {
		t.Helper()
		p, err := r.Next(ctx)
		if err != nil || p.Type != "prompt" || p.Content != want {
			t.Fatalf("runner got %+v, %v; want the prompt %q", p, err, want)
		}
	}
	next("first")
	if err := a.Handle(ctx, client.OpenCodeEvent{Type: "session.idle"}); err != nil {
		t.Fatal(err)
	}
	next("second")
	if err := a.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _, err := c.Events(ctx, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ends []string
	for _, e := range evs {
		if e.Type == "prompt.completed" || e.Type == "prompt.canceled" {
			ends = append(ends, e.Type)
		}
	}
	if strings.Join(ends, " ") != "prompt.completed prompt.canceled" {
		t.Fatalf("the prompts ended with %v", ends)
	}
}
