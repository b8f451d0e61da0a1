package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
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
		var f client.Fold
		for _, fr := range c.frames {
			if err := f.Apply(fr); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if got := show(&f); got != c.want {
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
