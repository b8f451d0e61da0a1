package conv_test

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

func partKinds(m *parley.Message) []string {
	var k []string
	for _, p := range m.Parts {
		s := p.Type
		if p.Type == parley.PartText && p.Streaming {
			s += "*"
		}
		k = append(k, s)
	}
	return k
}

func equalKinds(a []string, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAssemblyTextToolTextFinalize(t *testing.T) {
	t.Parallel()
	m := &parley.Message{}
	m.AppendText("I'll search ")
	m.AppendText("for that.")
	if k := partKinds(m); !equalKinds(k, "text*") || m.Parts[0].Text != "I'll search for that." {
		t.Fatalf("after deltas: %v %q", k, m.Parts[0].Text)
	}
	if !m.ApplyTool(conv.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolRunning, Args: json.RawMessage(`{"q":"x"}`)}.Part()) {
		t.Fatal("first update of a call must add a part")
	}
	if m.ApplyTool(conv.ToolUpdate{CallID: "c1", Status: parley.ToolCompleted, Result: json.RawMessage(`"found"`)}.Part()) {
		t.Fatal("second update of the same call must not add a part")
	}
	m.AppendText("The results ")
	m.AppendText("show it.")
	if k := partKinds(m); !equalKinds(k, "text", "tool-call", "text*") {
		t.Fatalf("text after a tool must start a new part: %v", k)
	}
	if p := m.Parts[1]; p.Status != parley.ToolCompleted || p.ToolName != "search" || string(p.Args) != `{"q":"x"}` || string(p.Result) != `"found"` {
		t.Fatalf("tool part = %+v", p)
	}
	conv.Finalize(m, parley.FinishEndTurn, "", "")
	if k := partKinds(m); !equalKinds(k, "text", "tool-call", "text", "finish") {
		t.Fatalf("finalized parts = %v", k)
	}
	if m.Content != "I'll search for that.The results show it." || m.Status != parley.StatusComplete || !conv.Finished(m) {
		t.Fatalf("content %q status %s", m.Content, m.Status)
	}
}

func TestFinalizeMarksUnfinishedToolsAsErrors(t *testing.T) {
	t.Parallel()
	m := &parley.Message{}
	m.ApplyTool(conv.ToolUpdate{CallID: "a", ToolName: "t", Status: parley.ToolPending}.Part())
	m.ApplyTool(conv.ToolUpdate{CallID: "b", ToolName: "t", Status: parley.ToolRunning}.Part())
	m.ApplyTool(conv.ToolUpdate{CallID: "c", ToolName: "t", Status: parley.ToolCompleted}.Part())
	conv.Finalize(m, parley.FinishEndTurn, "", "")
	for i, want := range []string{parley.ToolError, parley.ToolError, parley.ToolCompleted} {
		if got := m.Parts[i].Status; got != want {
			t.Fatalf("tool %d status %s, want %s", i, got, want)
		}
	}
	if m.Parts[0].Error == "" {
		t.Fatal("a tool call ended by finalize must say why")
	}
}

func TestFinalizeReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		reason, errText string
		kinds           []string
		status          parley.MessageStatus
	}{
		{parley.FinishCanceled, "", []string{"text", "finish"}, parley.StatusCanceled},
		{parley.FinishError, "", []string{"text", "finish"}, parley.StatusError},
		{parley.FinishEndTurn, "model overloaded", []string{"text", "error", "finish"}, parley.StatusError},
	}
	for _, c := range cases {
		m := &parley.Message{}
		m.AppendText("partial")
		conv.Finalize(m, c.reason, c.errText, "")
		if k := partKinds(m); !equalKinds(k, c.kinds...) || m.Status != c.status {
			t.Fatalf("%s/%q: parts %v status %s", c.reason, c.errText, k, m.Status)
		}
		last := m.Parts[len(m.Parts)-1]
		if c.errText != "" && (m.Parts[1].Message != c.errText || last.Reason != parley.FinishError) {
			t.Fatalf("error parts = %+v", m.Parts)
		}
	}
}

func TestFinalTextAddsOnlyWhatFollowsTheStreamedText(t *testing.T) {
	t.Parallel()
	m := &parley.Message{}
	m.AppendText("abc")
	conv.Finalize(m, parley.FinishEndTurn, "", "abcdef")
	if m.Content != "abcdef" || m.Content != parley.TextContent(m.Parts) || len(m.Parts) != 2 {
		t.Fatalf("content %q, parts %+v: want the longer finalText, in the text part", m.Content, m.Parts)
	}
	m = &parley.Message{}
	m.AppendText("abc")
	m.ApplyTool(parley.Part{Type: parley.PartToolCall, CallID: "c1", ToolName: "t", Status: parley.ToolCompleted})
	if err := conv.CheckFinalText(m, "abc, then more", conv.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	conv.Finalize(m, parley.FinishEndTurn, "", "abc, then more")
	if m.Content != "abc, then more" || m.Parts[2].Text != ", then more" || m.Content != parley.TextContent(m.Parts) {
		t.Fatalf("content %q, parts %+v: want the rest as a text part after the tool call", m.Content, m.Parts)
	}
	for _, bad := range []string{"ab", "xyzabcdef", "abd"} {
		m = &parley.Message{}
		m.AppendText("abc")
		if err := conv.CheckFinalText(m, bad, conv.DefaultLimits); parley.ErrorCode(err) != parley.EINVALIDVALUE {
			t.Fatalf("finalText %q after %q: %v, want invalid_value", bad, "abc", err)
		}
	}
	for _, same := range []string{"", "abc"} {
		if err := conv.CheckFinalText(m, same, conv.DefaultLimits); err != nil {
			t.Fatalf("finalText %q: %v", same, err)
		}
	}
}
