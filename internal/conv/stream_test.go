package conv_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// streamer drives one streaming message through a script, keeping its
// assembly as the engine does.
type streamer struct {
	sc    *script
	agent string
	id    string
	msg   *parley.Message
}

func startStream(t *testing.T, sc *script, agent, id string) *streamer {
	t.Helper()
	m := say(agent, parley.FinalityNone)
	m.ID, m.Parts, m.Streaming = id, nil, true
	d := sc.ok(m)
	if got := lastMessage(t, d); got.Status != parley.StatusStreaming || len(got.Parts) != 0 || got.UpdatedSeq != got.Seq {
		t.Fatalf("started message = %+v", got)
	}
	return &streamer{sc: sc, agent: agent, id: id, msg: d.Result.Message}
}

func (st *streamer) known() conv.StreamLookups { return conv.StreamLookups{Message: st.msg} }

func (st *streamer) text(delta string) conv.Decision {
	d := st.sc.ok(conv.StreamText{Actor: conv.Actor{AgentID: st.agent}, MessageID: st.id, Delta: delta, Known: st.known()})
	st.msg = d.Result.Message
	return d
}

func (st *streamer) tool(u conv.ToolUpdate) conv.Decision {
	d := st.sc.ok(conv.StreamTool{Actor: conv.Actor{AgentID: st.agent}, MessageID: st.id, Tool: u, Known: st.known()})
	st.msg = d.Result.Message
	return d
}

func TestStreamingMessageAssembly(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	st := startStream(t, sc, "bot", "r1")
	st.text("Let me ")
	d := st.text("search.")
	if types(d.Events) != "chunk" || len(d.Messages) != 0 {
		t.Fatalf("a delta writes %s and %d rows, want one chunk and no row", types(d.Events), len(d.Messages))
	}
	var ch parley.Chunk
	_ = json.Unmarshal(d.Events[0].Data, &ch)
	if ch.MessageID != "r1" || ch.Content != "search." || d.Events[0].Turn != 1 {
		t.Fatalf("chunk = %+v in turn %d", ch, d.Events[0].Turn)
	}
	d = st.tool(conv.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolRunning, Args: json.RawMessage(`{"q":"go"}`)})
	if types(d.Events) != "part.updated" || len(d.Messages) != 0 {
		t.Fatalf("tool update wrote %s, rows %d; want one part.updated and no row", types(d.Events), len(d.Messages))
	}
	var pu parley.PartUpdate
	_ = json.Unmarshal(d.Events[0].Data, &pu)
	if pu.MessageID != "r1" || pu.Part.CallID != "c1" || pu.Part.ToolName != "search" || string(pu.Part.Args) != `{"q":"go"}` || pu.Part.Status != parley.ToolRunning {
		t.Fatalf("part.updated = %+v", pu)
	}
	// The runner sends the args again with the result: only what changed is written.
	d = st.tool(conv.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolCompleted, Args: json.RawMessage(`{"q":"go"}`), Result: json.RawMessage(`"found"`)})
	if pu = (parley.PartUpdate{}); json.Unmarshal(d.Events[0].Data, &pu) != nil || pu.Part.Args != nil || pu.Part.ToolName != "" || string(pu.Part.Result) != `"found"` {
		t.Fatalf("the second update wrote %s; want the status and the result only", d.Events[0].Data)
	}
	st.text("Found it.")
	d = sc.ok(conv.FinalizeMessage{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Reason: parley.FinishEndTurn, Finality: parley.FinalityTurn, Known: st.known()})
	m := lastMessage(t, d)
	if k := partKinds(m); !equalKinds(k, "text", "tool-call", "text", "finish") {
		t.Fatalf("parts = %v", k)
	}
	if m.Content != "Let me search.Found it." || m.Status != parley.StatusComplete || d.Events[0].Finality != parley.FinalityTurn {
		t.Fatalf("final message = %+v", m)
	}
	if sc.s.Open != nil || sc.s.Streams.Len() != 0 {
		t.Fatalf("after finalize: open %+v, streams %v", sc.s.Open, sc.s.Streams)
	}
	// Finalized: no more deltas.
	sc.fail(conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Delta: "late", Known: st.known()}, parley.ENOTFOUND)
	checkInvariants(sc)
}

func TestStreamingCheckpointsAreBounded(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.env.Limits.CheckpointChunks = 4
	sc.env.Limits.CheckpointBytes = 1 << 20
	st := startStream(t, sc, "bot", "r1")
	rows := 0
	for i := 0; i < 12; i++ {
		d := st.text("x")
		if len(d.Messages) > 0 {
			rows++
			if d.Messages[0].Content != strings.Repeat("x", i+1) || d.Messages[0].UpdatedSeq != d.Events[0].Seq {
				t.Fatalf("checkpoint row %d = %q as of %d", rows, d.Messages[0].Content, d.Messages[0].UpdatedSeq)
			}
		}
	}
	if rows != 2 {
		t.Fatalf("12 deltas wrote %d rows, want 2 (after 4 chunks, then 4 more; the next after 8 more)", rows)
	}
	for i := 0; i < 4; i++ { // chunks 13..16: the row holds 8, so the 8th chunk since writes it
		if d := st.text("x"); len(d.Messages) != map[bool]int{true: 1, false: 0}[i == 3] {
			t.Fatalf("chunk %d: %d rows", 13+i, len(d.Messages))
		}
	}
	sc.env.Limits.CheckpointBytes = 10
	sc.env.Limits.CheckpointChunks = 1 << 20
	if d := st.text(strings.Repeat("y", 10)); len(d.Messages) != 0 {
		t.Fatal("10 bytes checkpointed though the row holds 16")
	}
	if d := st.text(strings.Repeat("y", 6)); len(d.Messages) != 1 {
		t.Fatal("16 bytes since the row (which holds 16) did not checkpoint")
	}
	checkInvariants(sc)
}

func TestStreamingRules(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	bad := say("bot", parley.FinalityNone)
	bad.Streaming = true
	sc.fail(bad, parley.EINVALIDVALUE) // a streaming message starts empty
	st := startStream(t, sc, "bot", "r1")
	sc.fail(conv.StreamText{Actor: conv.Actor{AgentID: "other"}, MessageID: "r1", Delta: "x", Known: st.known()}, parley.EFORBIDDEN)
	sc.fail(conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "nope", Delta: "x"}, parley.ENOTFOUND)
	if d := sc.ok(conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Delta: "", Known: st.known()}); len(d.Events) != 0 || d.Result.Seq != 0 {
		t.Fatalf("an empty delta wrote %s (seq %d); model APIs stream them, and they change nothing", types(d.Events), d.Result.Seq)
	}
	sc.fail(conv.StreamText{Actor: conv.Actor{AgentID: "other"}, MessageID: "r1", Delta: "", Known: st.known()}, parley.EFORBIDDEN)
	sc.fail(conv.StreamTool{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Tool: conv.ToolUpdate{CallID: "c", Status: "running"}, Known: st.known()}, parley.EINVALIDVALUE)
	sc.fail(conv.FinalizeMessage{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Reason: "bored", Known: st.known()}, parley.EINVALIDVALUE)
	sc.fail(say("other", parley.FinalityNone), parley.ETURNCONFLICT) // the streaming message holds the turn
	st.text("partial")
	d := sc.ok(conv.FinalizeMessage{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Reason: parley.FinishCanceled, Finality: parley.FinalityNone, Known: st.known()})
	if m := lastMessage(t, d); m.Status != parley.StatusCanceled || sc.s.Open == nil {
		t.Fatalf("canceled with finality none: status %s, open %+v", m.Status, sc.s.Open)
	}
	// Left empty, finality closes the writer's own turn, but not the owner's
	// turn when the writer is a delegate.
	sc.ok(conv.Delegate{Actor: conv.Actor{AgentID: "bot"}, To: "worker"})
	w := startStream(t, sc, "worker", "w1")
	sc.ok(conv.FinalizeMessage{Actor: conv.Actor{AgentID: "worker"}, MessageID: "w1", Reason: parley.FinishEndTurn, Known: w.known()})
	if sc.s.Open == nil || sc.s.Open.Owner != "bot" {
		t.Fatalf("a delegate's response closed the owner's turn: %+v", sc.s.Open)
	}
	retry := startStream(t, sc, "bot", "r2")
	sc.ok(conv.FinalizeMessage{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r2", Reason: parley.FinishEndTurn, Known: retry.known()})
	if sc.s.Open != nil {
		t.Fatalf("the owner's response left its turn open: %+v", sc.s.Open)
	}
	checkInvariants(sc)
}

func TestRevertDropsStreamingMessages(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	if d := sc.ok(conv.Revert{Actor: conv.Actor{AgentID: "a"}, MessageID: "ghost"}); len(d.Events) != 0 {
		t.Fatal("reverting an unknown message wrote something")
	}
	st := startStream(t, sc, "bot", "r1")
	st.text("x")
	// Reverting the message its turn was streaming closes that turn: its
	// writer can no longer finalize it, and nobody else could write.
	d := sc.ok(conv.Revert{Actor: conv.Actor{AgentID: "a"}, MessageID: "r1", Known: []string{"r1"}})
	if types(d.Events) != "messages.removed turn.aborted" || len(d.Removed) != 1 || sc.s.Streams.Len() != 0 || sc.s.Open != nil {
		t.Fatalf("revert: %s, removed %v, streams %v, open %+v", types(d.Events), d.Removed, sc.s.Streams, sc.s.Open)
	}
	sc.fail(conv.StreamText{Actor: conv.Actor{AgentID: "bot"}, MessageID: "r1", Delta: "y", Known: st.known()}, parley.ENOTFOUND)
	sc.ok(say("other", parley.FinalityTurn)) // the floor is free
	checkInvariants(sc)
}

// TestRevertKeepsATurnThatStillStreams: a revert closes the turn only when
// no message streams in it any more.
func TestRevertKeepsATurnThatStillStreams(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	startStream(t, sc, "bot", "r1")
	sc.ok(conv.Delegate{Actor: conv.Actor{AgentID: "bot"}, To: "worker"})
	startStream(t, sc, "worker", "w1")
	d := sc.ok(conv.Revert{Actor: conv.Actor{AgentID: "a"}, MessageID: "w1", Known: []string{"w1"}})
	if types(d.Events) != "messages.removed" || sc.s.Open == nil || sc.s.Streams.Len() != 1 {
		t.Fatalf("revert: %s, open %+v, streams %v", types(d.Events), sc.s.Open, sc.s.Streams)
	}
	checkInvariants(sc)
}
