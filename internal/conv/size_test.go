package conv_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// sizedScript is a script whose messages may hold at most 1000 bytes, 600
// of them text, and of which 3 may stream at once.
func sizedScript(t *testing.T) *script {
	sc := newScript(t, parley.PolicyFree)
	sc.env.Limits.MaxMessageBytes, sc.env.Limits.MaxTextBytes, sc.env.Limits.MaxStreaming = 1000, 600, 3
	return sc
}

func quoted(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`) }

// TestMessageSizeHoldsOnEveryPath: the bound on a message's whole size
// (text, tool calls, errors, metadata) holds for a posted message, a text
// delta, a tool update and a finalize, and a refusal writes nothing.
func TestMessageSizeHoldsOnEveryPath(t *testing.T) {
	t.Parallel()
	sc := sizedScript(t)
	big := say("bot", parley.FinalityNone)
	big.Parts = append(big.Parts, parley.Part{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: parley.ToolCompleted, Args: quoted(600), Result: quoted(400)})
	if e := sc.fail(big, parley.ETOOLARGE); e.Details["maxMessageBytes"] != 1000 {
		t.Fatalf("the refusal does not name the limit: %+v", e)
	}
	meta := say("bot", parley.FinalityNone)
	meta.Parts[0].Text, meta.Metadata = strings.Repeat("x", 590), quoted(500)
	sc.fail(meta, parley.ETOOLARGE)

	st := startStream(t, sc, "bot", "r1")
	st.text(strings.Repeat("x", 300))
	st.tool(conv.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolRunning, Args: quoted(500)})
	tool := conv.StreamTool{Actor: actor("bot"), MessageID: "r1", Tool: conv.ToolUpdate{CallID: "c1", Status: parley.ToolCompleted, Result: quoted(201)}, Known: st.known()}
	sc.fail(tool, parley.ETOOLARGE) // 300 + 500 + 201
	sc.fail(conv.StreamText{Actor: actor("bot"), MessageID: "r1", Delta: strings.Repeat("y", 201), Known: st.known()}, parley.ETOOLARGE)
	fail := conv.FinalizeMessage{Actor: actor("bot"), MessageID: "r1", Reason: parley.FinishError, Error: strings.Repeat("e", 201), Known: st.known()}
	sc.fail(fail, parley.ETOOLARGE)
	long := conv.FinalizeMessage{Actor: actor("bot"), MessageID: "r1", Reason: parley.FinishEndTurn, FinalText: strings.Repeat("f", 601), Known: st.known()}
	sc.fail(long, parley.ETOOLARGE)
	// Up to the limit is fine, and a finalize that adds nothing of the
	// writer's ends a full message even though it notes the call left running.
	tool.Tool.Result = quoted(100)
	st.tool(tool.Tool)
	st.text(strings.Repeat("y", 100))
	if m := st.msg; m.Size() != 1000 {
		t.Fatalf("the message is %d bytes, want 1000", m.Size())
	}
	st.tool(conv.ToolUpdate{CallID: "c2", ToolName: "search", Status: parley.ToolRunning})
	d := sc.ok(conv.FinalizeMessage{Actor: actor("bot"), MessageID: "r1", Reason: parley.FinishEndTurn, Known: st.known()})
	if m := lastMessage(t, d); m.Status != parley.StatusComplete || m.Parts[len(m.Parts)-2].Error == "" {
		t.Fatalf("finalized: %+v", m)
	}
	checkInvariants(sc)
}

// TestStreamingMessagesAreBounded: a conversation may have MaxStreaming
// messages streaming at once; one more is 409 busy with the head, until
// one ends.
func TestStreamingMessagesAreBounded(t *testing.T) {
	t.Parallel()
	sc := sizedScript(t)
	var st []*streamer
	for i := range 3 {
		st = append(st, startStream(t, sc, "bot", fmt.Sprintf("r%d", i)))
	}
	more := say("bot", parley.FinalityNone)
	more.ID, more.Parts, more.Streaming = "r3", nil, true
	if e := sc.fail(more, parley.EBUSY); e.Head == nil || e.Details["maxStreaming"] != 3 {
		t.Fatalf("busy without the head or the limit: %+v", e)
	}
	sc.ok(say("bot", parley.FinalityNone)) // a whole message is not streaming
	sc.ok(conv.FinalizeMessage{Actor: actor("bot"), MessageID: "r0", Reason: parley.FinishEndTurn, Finality: parley.FinalityNone, Known: st[0].known()})
	sc.ok(more)
	checkInvariants(sc)
}

// TestToolUpdatesCostWhatChanged: each tool update writes one part.updated
// event with what changed, and rows only at checkpoints, so what a message
// with many tool calls costs in the log stays linear in its size (each
// update used to write the whole message again).
func TestToolUpdatesCostWhatChanged(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	st := startStream(t, sc, "bot", "r1")
	written := 0
	count := func(d conv.Decision) {
		for _, e := range d.Events {
			written += len(e.Data)
		}
		for _, m := range d.Messages {
			written += len(mustJSON(m))
		}
	}
	args := quoted(10 << 10)
	for i := range 30 {
		call := fmt.Sprintf("c%d", i)
		count(st.tool(conv.ToolUpdate{CallID: call, ToolName: "fetch", Status: parley.ToolPending, Args: args}))
		count(st.tool(conv.ToolUpdate{CallID: call, ToolName: "fetch", Status: parley.ToolRunning, Args: args}))
		count(st.tool(conv.ToolUpdate{CallID: call, ToolName: "fetch", Status: parley.ToolCompleted, Args: args, Result: quoted(2 << 10)}))
		count(st.text("ok. "))
	}
	d := sc.ok(conv.FinalizeMessage{Actor: actor("bot"), MessageID: "r1", Reason: parley.FinishEndTurn, Known: st.known()})
	count(d)
	size := len(mustJSON(lastMessage(t, d)))
	ratio := float64(written) / float64(size)
	t.Logf("a message of %d bytes wrote %d bytes (%.2f×)", size, written, ratio)
	// Its events once, checkpoint rows at most about twice (their interval
	// doubles), the finalize's event and row once each.
	if ratio > 6 {
		t.Fatalf("a message of %d bytes wrote %d bytes of events and rows (%.1f×); want it linear (at most 6×)", size, written, ratio)
	}
	checkInvariants(sc)
}
