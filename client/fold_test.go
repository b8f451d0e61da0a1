package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// ev makes an event of the log with data d.
func ev(seq int64, typ string, d any) client.Frame {
	data, _ := json.Marshal(d)
	e := parley.Event{Seq: seq, Type: typ, Data: data}
	return client.Frame{Type: typ, Event: &e}
}

func msg(id string, seq, updated int64, status parley.MessageStatus, parts ...parley.Part) *parley.Message {
	if parts == nil {
		parts = []parley.Part{}
	}
	return &parley.Message{ID: id, Seq: seq, UpdatedSeq: updated, Status: status, Parts: parts, Content: parley.TextContent(parts)}
}

func text(s string, streaming bool) parley.Part {
	return parley.Part{Type: parley.PartText, Text: s, Streaming: streaming}
}

func chunk(id, s string) parley.Chunk { return parley.Chunk{MessageID: id, Content: s} }

func toolUpdate(id, call, status string, args string) parley.PartUpdate {
	p := parley.Part{Type: parley.PartToolCall, CallID: call, Status: status}
	if args != "" {
		p.ToolName, p.Args = "search", json.RawMessage(args)
	}
	return parley.PartUpdate{MessageID: id, Part: p}
}

func summary(m *parley.Message) *parley.Message { return m.Summarize(600_000) }

func initFrame(recovered bool, ms ...*parley.Message) client.Frame {
	return client.Frame{Type: "init", Init: &client.Init{Recovered: recovered, Messages: ms}}
}

// show renders the fold as "id:status:content[parts]" per message.
func show(f *client.Fold) string {
	var out []string
	for _, m := range f.Messages() {
		var kinds []string
		for _, p := range m.Parts {
			k := p.Type
			if p.Streaming {
				k += "~"
			}
			if p.Type == parley.PartToolCall {
				k += "(" + strings.TrimSpace(p.ToolName+" "+p.Status+" "+string(p.Args)) + ")"
			}
			kinds = append(kinds, k)
		}
		if m.Summarized != nil {
			kinds = append(kinds, fmt.Sprintf("summary of %d bytes", m.Summarized.Bytes))
		}
		out = append(out, fmt.Sprintf("%s:%s:%q%v", m.ID, m.Status, m.Content, kinds))
	}
	return strings.Join(out, " ")
}

// folded is a fold of frames, which it must take.
func folded(t *testing.T, name string, frames []client.Frame) *client.Fold {
	t.Helper()
	var f client.Fold
	for _, fr := range frames {
		if err := f.Apply(fr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return &f
}

// TestFoldMergeRules: the merge rules of the stream protocol, case by case.
func TestFoldMergeRules(t *testing.T) {
	t.Parallel()
	tool := parley.Part{Type: parley.PartToolCall, CallID: "c1", ToolName: "search", Status: parley.ToolRunning}
	cases := []struct {
		name   string
		frames []client.Frame
		want   string
	}{
		{"a snapshot's streaming message grows by the chunks after it", []client.Frame{
			initFrame(false, msg("r1", 3, 9, parley.StatusStreaming, text("The ", true))),
			ev(10, parley.EventChunk, chunk("r1", "answer")),
		}, `r1:streaming:"The answer"[text~]`},
		{"a chunk the message already holds is skipped", []client.Frame{
			initFrame(false, msg("r1", 3, 9, parley.StatusStreaming, text("The answer", true))),
			ev(9, parley.EventChunk, chunk("r1", "answer")),
			ev(10, parley.EventChunk, chunk("r1", ".")),
		}, `r1:streaming:"The answer."[text~]`},
		{"a chunk of a message not held is ignored", []client.Frame{
			initFrame(false),
			ev(5, parley.EventChunk, chunk("r9", "lost?")),
		}, ``},
		{"a message starts empty and grows", []client.Frame{
			initFrame(false),
			ev(4, parley.EventMessage, msg("r1", 4, 4, parley.StatusStreaming)),
			ev(5, parley.EventChunk, chunk("r1", "one ")),
			ev(6, parley.EventChunk, chunk("r1", "two")),
		}, `r1:streaming:"one two"[text~]`},
		{"text after a tool call starts a new part", []client.Frame{
			initFrame(false),
			ev(4, parley.EventMessage, msg("r1", 4, 4, parley.StatusStreaming)),
			ev(5, parley.EventChunk, chunk("r1", "Let me look. ")),
			ev(6, parley.EventMessageUpdated, msg("r1", 4, 6, parley.StatusStreaming, text("Let me look. ", false), tool)),
			ev(7, parley.EventChunk, chunk("r1", "Found it.")),
		}, `r1:streaming:"Let me look. Found it."[text tool-call(search running) text~]`},
		{"part.updated adds a tool call, which ends the text part", []client.Frame{
			initFrame(false),
			ev(4, parley.EventMessage, msg("r1", 4, 4, parley.StatusStreaming)),
			ev(5, parley.EventChunk, chunk("r1", "Let me look. ")),
			ev(6, parley.EventPartUpdated, toolUpdate("r1", "c1", parley.ToolRunning, `{"q":"x"}`)),
			ev(7, parley.EventChunk, chunk("r1", "Found it.")),
			ev(8, parley.EventPartUpdated, toolUpdate("r1", "c1", parley.ToolCompleted, "")),
		}, `r1:streaming:"Let me look. Found it."[text tool-call(search completed {"q":"x"}) text~]`},
		{"part.updated changes the call it names and keeps what it leaves out", []client.Frame{
			initFrame(false, msg("r1", 3, 9, parley.StatusStreaming, text("a", false), parley.Part{Type: parley.PartToolCall, CallID: "c1", ToolName: "search", Status: parley.ToolRunning, Args: json.RawMessage(`{"q":"x"}`)})),
			ev(9, parley.EventPartUpdated, toolUpdate("r1", "c1", parley.ToolError, "")), // already held
			ev(10, parley.EventPartUpdated, toolUpdate("r1", "c1", parley.ToolCompleted, "")),
		}, `r1:streaming:"a"[text tool-call(search completed {"q":"x"})]`},
		{"a summarized message ignores chunks and tool updates", []client.Frame{
			initFrame(false, summary(msg("r1", 3, 9, parley.StatusStreaming, text("big", true))), msg("m5", 5, 5, parley.StatusComplete, text("small", false))),
			ev(10, parley.EventChunk, chunk("r1", "more")),
			ev(11, parley.EventPartUpdated, toolUpdate("r1", "c1", parley.ToolRunning, `{}`)),
		}, `r1:streaming:""[summary of 600000 bytes] m5:complete:"small"[text]`},
		{"message.updated replaces a summarized message", []client.Frame{
			initFrame(false, summary(msg("r1", 3, 9, parley.StatusStreaming, text("big", true)))),
			ev(10, parley.EventChunk, chunk("r1", "more")),
			ev(11, parley.EventMessageUpdated, msg("r1", 3, 11, parley.StatusComplete, text("big and more", false))),
		}, `r1:complete:"big and more"[text]`},
		{"message.updated replaces the whole message", []client.Frame{
			initFrame(false, msg("r1", 3, 3, parley.StatusStreaming, text("draft", true))),
			ev(8, parley.EventMessageUpdated, msg("r1", 3, 8, parley.StatusCanceled, text("final", false), parley.Part{Type: parley.PartFinish, Reason: "canceled"})),
		}, `r1:canceled:"final"[text finish]`},
		{"message.updated of a message not held holds it", []client.Frame{
			initFrame(false, msg("m5", 5, 5, parley.StatusComplete, text("newer", false))),
			ev(9, parley.EventMessageUpdated, msg("m2", 2, 9, parley.StatusComplete, text("older", false))),
		}, `m2:complete:"older"[text] m5:complete:"newer"[text]`},
		{"messages.removed drops the messages", []client.Frame{
			initFrame(false, msg("a", 2, 2, parley.StatusComplete, text("a", false)), msg("b", 3, 3, parley.StatusStreaming)),
			ev(4, parley.EventMessagesRemoved, parley.MessagesRemoved{MessageIDs: []string{"b", "ghost"}}),
		}, `a:complete:"a"[text]`},
		{"a recovered init keeps what is held", []client.Frame{
			initFrame(false, msg("a", 2, 2, parley.StatusComplete, text("a", false))),
			initFrame(true),
			ev(3, parley.EventMessage, msg("b", 3, 3, parley.StatusComplete, text("b", false))),
		}, `a:complete:"a"[text] b:complete:"b"[text]`},
		{"an init that is not recovered replaces everything", []client.Frame{
			initFrame(false, msg("a", 2, 2, parley.StatusComplete, text("a", false))),
			initFrame(false, msg("z", 7, 7, parley.StatusComplete, text("z", false))),
		}, `z:complete:"z"[text]`},
		{"other events change nothing", []client.Frame{
			initFrame(false, msg("a", 2, 2, parley.StatusComplete, text("a", false))),
			ev(3, parley.EventTurnClaimed, parley.Claim{AgentID: "b", Turn: 2}),
			{Type: "guidance", Guidance: &parley.Guidance{NextAgentID: "b"}},
		}, `a:complete:"a"[text]`},
	}
	for _, c := range cases {
		f := folded(t, c.name, c.frames)
		if got := show(f); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	var f client.Fold
	bad := parley.Event{Seq: 3, Type: parley.EventChunk, Data: json.RawMessage(`"not a chunk"`)}
	if err := f.ApplyEvent(bad); err == nil {
		t.Fatal("a chunk whose data is not a chunk was folded in")
	}
}

// TestFoldKeepsItsOwnCopies: what the fold holds does not change when the
// frames it was given do, and the other way round.
func TestFoldKeepsItsOwnCopies(t *testing.T) {
	t.Parallel()
	m := msg("r1", 3, 3, parley.StatusStreaming, text("The ", true))
	var f client.Fold
	_ = f.Apply(initFrame(false, m))
	_ = f.Apply(ev(4, parley.EventChunk, chunk("r1", "end")))
	if m.Parts[0].Text != "The " || m.Content != "The " {
		t.Fatalf("folding a chunk changed the init's message: %+v", m)
	}
	m.Parts[0].Text = "changed"
	if got := f.Message("r1"); got.Content != "The end" || got.Parts[0].Text != "The end" {
		t.Fatalf("fold holds %+v", got)
	}
	// What Messages returned does not grow as more frames are folded in.
	held := f.Messages()[0]
	_ = f.Apply(ev(5, parley.EventChunk, chunk("r1", "!")))
	if held.Parts[0].Text != "The end" || f.Message("r1").Parts[0].Text != "The end!" {
		t.Fatalf("a message Messages returned changed to %+v", held)
	}
}

// TestFoldHoldsFetchedCopies: Missing names the summarized messages in seq
// order; Hold puts a copy read over HTTP in place of a summary (or of an
// older copy), after which the chunks after the copy's updatedSeq continue
// it; Hold never adds a message the fold does not hold (it was removed
// meanwhile) nor takes an older or summarized copy.
func TestFoldHoldsFetchedCopies(t *testing.T) {
	t.Parallel()
	var f client.Fold
	_ = f.Apply(initFrame(false,
		summary(msg("a", 3, 9, parley.StatusStreaming, text("A", true))),
		summary(msg("b", 5, 5, parley.StatusComplete, text("B", false))),
		msg("c", 7, 7, parley.StatusComplete, text("c", false))))
	if got := strings.Join(f.Missing(), " "); got != "a b" {
		t.Fatalf("missing %q, want the summarized a and b", got)
	}
	_ = f.Apply(ev(10, parley.EventChunk, chunk("a", " lost")))
	// a, read over HTTP once the server was at seq 12: it has what chunk 10 added.
	if !f.Hold(msg("a", 3, 12, parley.StatusStreaming, text("A lost and found", true))) {
		t.Fatal("the fetched copy of a summarized message was not taken")
	}
	_ = f.Apply(ev(12, parley.EventChunk, chunk("a", " twice")))
	_ = f.Apply(ev(13, parley.EventChunk, chunk("a", "!")))
	if !f.Hold(msg("b", 5, 5, parley.StatusComplete, text("B whole", false))) {
		t.Fatal("the fetched copy of a summarized finished message was not taken")
	}
	for _, m := range []*parley.Message{
		msg("ghost", 8, 8, parley.StatusComplete, text("removed", false)),      // not held
		msg("a", 3, 11, parley.StatusStreaming, text("older", true)),           // older than held
		summary(msg("c", 7, 8, parley.StatusComplete, text("summary", false))), // a summary
	} {
		if f.Hold(m) {
			t.Fatalf("Hold took %s as of %d", m.ID, m.UpdatedSeq)
		}
	}
	if len(f.Missing()) != 0 {
		t.Fatalf("still missing %v", f.Missing())
	}
	if got, want := show(&f), `a:streaming:"A lost and found!"[text~] b:complete:"B whole"[text] c:complete:"c"[text]`; got != want {
		t.Fatalf("fold:\n got %s\nwant %s", got, want)
	}
}

// by makes the event of fr an event of agent in turn 2 of exchange p1.
func by(agent string, fr client.Frame) client.Frame {
	e := *fr.Event
	e.AgentID, e.Turn, e.TurnID = agent, 2, "p1"
	return client.Frame{Type: fr.Type, Event: &e}
}

// withTexts gives an init frame a snapshot's streaming texts.
func withTexts(fr client.Frame, ts ...client.StreamingText) client.Frame {
	in := *fr.Init
	in.Streaming = ts
	return client.Frame{Type: fr.Type, Init: &in}
}

// showStreaming renders the fold's streaming texts as "agent@seq-updated:content".
func showStreaming(f *client.Fold) string {
	var out []string
	for _, s := range f.Streaming() {
		out = append(out, fmt.Sprintf("%s@%d-%d:%q", s.AgentID, s.Seq, s.UpdatedSeq, s.Content))
	}
	return strings.Join(out, " ")
}

// TestFoldStreamingTextOfV1: in a v1 conversation text streams as chunks
// that name no message before a row holds it. The fold shows it apart
// from the messages, one text per agent, until the agent's next message,
// its turn's end, its prompt's end, a revert or a snapshot, which holds
// its own; a chunk it already has changes nothing.
func TestFoldStreamingTextOfV1(t *testing.T) {
	t.Parallel()
	row := func(id string, seq int64, agent string, fin parley.Finality) *parley.Message {
		m := msg(id, seq, seq, parley.StatusStreaming)
		m.AgentID, m.Finality = agent, fin
		return m
	}
	start := []client.Frame{
		initFrame(false),
		by("alice", ev(5, parley.EventChunk, chunk("", "Let me "))),
		by("bob", ev(6, parley.EventChunk, chunk("", "Hm"))),
		by("alice", ev(7, parley.EventChunk, chunk("", "look."))),
	}
	then := func(fr ...client.Frame) []client.Frame { return append(append([]client.Frame{}, start...), fr...) }
	cases := []struct {
		name   string
		frames []client.Frame
		want   string
	}{
		{"chunks that name no message grow their agent's text", start, `alice@5-7:"Let me look." bob@6-6:"Hm"`},
		{"a chunk already folded changes nothing", then(by("alice", ev(7, parley.EventChunk, chunk("", "look.")))), `alice@5-7:"Let me look." bob@6-6:"Hm"`},
		{"the agent's next message holds the text", then(by("alice", ev(8, parley.EventMessage, row("r1", 8, "alice", parley.FinalityNone)))), `bob@6-6:"Hm"`},
		{"another agent's message does not", then(by("carol", ev(8, parley.EventMessage, row("r1", 8, "carol", parley.FinalityNone)))), `alice@5-7:"Let me look." bob@6-6:"Hm"`},
		{"a chunk of a message is the message's", then(by("alice", ev(8, parley.EventChunk, chunk("r0", "x")))), `alice@5-7:"Let me look." bob@6-6:"Hm"`},
		{"an update that keeps the turn open does not end it", then(by("alice", ev(8, parley.EventMessageUpdated, row("r0", 4, "alice", parley.FinalityNone)))), `alice@5-7:"Let me look." bob@6-6:"Hm"`},
		{"an update that closes the agent's turn ends it", then(by("alice", ev(8, parley.EventMessageUpdated, row("r0", 4, "alice", parley.FinalityTurn)))), `bob@6-6:"Hm"`},
		{"a message that closes the conversation ends every one", then(by("carol", ev(8, parley.EventMessage, row("r1", 8, "carol", parley.FinalityConversation)))), ``},
		{"the end of the agent's prompt ends it", then(by("bob", ev(8, client.EventPromptCompleted, map[string]string{"id": "p1"}))), `alice@5-7:"Let me look."`},
		{"so does a prompt canceled", then(by("alice", ev(8, client.EventPromptCanceled, map[string]string{"id": "p1", "reason": "aborted"}))), `bob@6-6:"Hm"`},
		{"and one put back in the queue", then(by("alice", ev(8, client.EventPromptRequeued, map[string]string{"id": "p1"}))), `bob@6-6:"Hm"`},
		{"and a turn reset", then(by("bob", ev(8, parley.EventTurnReset, parley.TurnRef{Turn: 2}))), `alice@5-7:"Let me look."`},
		{"an event before the text ends nothing", then(by("alice", ev(7, client.EventPromptCompleted, map[string]string{"id": "p1"}))), `alice@5-7:"Let me look." bob@6-6:"Hm"`},
		{"a revert ends every one", then(by("human", ev(8, parley.EventMessagesRemoved, parley.MessagesRemoved{MessageIDs: []string{"p1"}}))), ``},
		{"a snapshot ends every one", then(initFrame(false)), ``},
		{"and holds its own, which go on", then(withTexts(initFrame(false), client.StreamingText{AgentID: "carol", Turn: 3, Seq: 9, UpdatedSeq: 10, Content: "So "}),
			by("carol", ev(10, parley.EventChunk, chunk("", "So "))), by("carol", ev(11, parley.EventChunk, chunk("", "far")))), `carol@9-11:"So far"`},
		{"a resumed stream keeps them", then(initFrame(true), by("alice", ev(8, parley.EventChunk, chunk("", " Now.")))), `alice@5-8:"Let me look. Now." bob@6-6:"Hm"`},
		{"text after the row starts anew", then(by("alice", ev(8, parley.EventMessage, row("r1", 8, "alice", parley.FinalityNone))), by("alice", ev(9, parley.EventChunk, chunk("", "More")))), `bob@6-6:"Hm" alice@9-9:"More"`},
	}
	for _, c := range cases {
		f := folded(t, c.name, c.frames)
		if got := showStreaming(f); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		for _, m := range f.Messages() {
			if m.Content != "" {
				t.Errorf("%s: message %s holds %q: streamed text that names no message went into a message", c.name, m.ID, m.Content)
			}
		}
	}
	// The streaming text of the first case carries its turn and exchange.
	if s := folded(t, "start", start).Streaming()[0]; s.Turn != 2 || s.TurnID != "p1" {
		t.Fatalf("streaming text %+v, want turn 2 of exchange p1", s)
	}
}

// TestFoldFollowsAV1Runner: a runner of the first protocol answers in a
// conversation made with messageFormat v1, and a fold of its stream shows
// the streamed text as it comes (no message holds it yet), then the row
// that holds it in its place; text streamed after the last row is gone
// when the answer completes, as the server holds none of it. A fold of the
// whole log from its start ends the same.
func TestFoldFollowsAV1Runner(t *testing.T) {
	t.Parallel()
	_, url, ctx := serve(t, engine.Options{}, api.Options{Open: true})
	c := client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}, Members: []string{"human"}, MessageFormat: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	u := strings.Replace(url, "http", "ws", 1) + "/v1/conversations/" + id + "/runner?agentId=alice"
	run, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer run.CloseNow()
	read := func() map[string]any {
		t.Helper()
		_, data, err := run.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if _, err := c.Ask(ctx, id, "human", "what is there?", ""); err != nil {
		t.Fatal(err)
	}
	if f := read(); f["type"] != "prompt" {
		t.Fatalf("the runner got %v, want its prompt", f)
	}
	st := c.Subscribe(ctx, id, client.SubscribeOptions{})
	defer st.Close()
	var f client.Fold
	if fr, err := st.Next(ctx); err != nil || fr.Init == nil {
		t.Fatalf("the stream began with %+v, %v; want its init", fr, err)
	} else {
		_ = f.Apply(fr)
	}
	// step sends a frame and folds the stream up to the seq it was acked with.
	step := func(frame string) {
		t.Helper()
		if err := run.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		ack := read()
		seq, ok := ack["seq"].(float64)
		if ack["type"] != "ack" || !ok {
			t.Fatalf("%s answered %v", frame, ack)
		}
		for at := int64(0); at < int64(seq); {
			fr, err := st.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Apply(fr); err != nil {
				t.Fatal(err)
			}
			if fr.Event != nil {
				at = fr.Event.Seq
			}
		}
	}
	answer := func() string {
		var out []string
		for _, m := range f.Messages() {
			if m.Role != parley.RoleUser {
				out = append(out, string(m.Role)+":"+m.Content)
			}
		}
		return strings.Join(out, " ")
	}
	for _, s := range []struct{ frame, streaming, answer string }{
		{`{"type":"stream","content":"Let me "}`, `"Let me "`, ``},
		{`{"type":"stream","content":"look."}`, `"Let me look."`, ``},
		{`{"type":"result","content":"Let me look."}`, ``, `assistant:Let me look.`},
		{`{"type":"tool","callId":"c1","toolName":"search","status":"running"}`, ``, `assistant:Let me look. tool:`},
		{`{"type":"stream","content":"Found"}`, `"Found"`, `assistant:Let me look. tool:`},
		{`{"type":"tool","callId":"c1","toolName":"search","status":"completed","result":"x"}`, `"Found"`, `assistant:Let me look. tool:`},
		{`{"type":"complete"}`, ``, `assistant:Let me look. tool:`},
	} {
		step(s.frame)
		var got []string
		for _, t := range f.Streaming() {
			if t.AgentID != "alice" || t.TurnID == "" {
				got = append(got, fmt.Sprintf("%+v", t))
				continue
			}
			got = append(got, fmt.Sprintf("%q", t.Content))
		}
		if g := strings.Join(got, " "); g != s.streaming || answer() != s.answer {
			t.Fatalf("after %s: streaming %s, messages %q; want streaming %s, messages %q", s.frame, g, answer(), s.streaming, s.answer)
		}
	}
	// From the log's start, the same; an Accumulator says which text each chunk grew.
	whole := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{}})
	defer whole.Close()
	acc := client.NewAccumulator(c, id)
	var grew []string
	for last := f.Messages()[len(f.Messages())-1].UpdatedSeq; ; {
		fr, err := whole.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u, err := acc.Add(ctx, fr)
		if err != nil {
			t.Fatal(err)
		}
		if u.Streaming != nil {
			grew = append(grew, u.Streaming.AgentID+":"+u.Streaming.Content)
		}
		if fr.Event != nil && fr.Event.Seq >= last {
			break
		}
	}
	if got := strings.Join(grew, "|"); got != "alice:Let me |alice:Let me look.|alice:Found" {
		t.Errorf("the chunks grew %q", got)
	}
	var g client.Fold
	for _, m := range acc.Messages() {
		_ = g.Apply(ev(m.Seq, parley.EventMessage, m))
	}
	if len(acc.Streaming()) != 0 || show(&g) != show(&f) {
		t.Fatalf("the whole log folds to %s (streaming %v), the live stream to %s", show(&g), acc.Streaming(), show(&f))
	}
}
