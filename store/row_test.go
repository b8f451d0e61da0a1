package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

// rowCases are messages whose rows leave content out, and some that keep it.
func rowCases() []*parley.Message {
	now := parley.NewTime(parley.Time{}.Time)
	base := func(parts []parley.Part, content string) *parley.Message {
		return &parley.Message{ID: "m1", ConversationID: "c1", Seq: 2, Role: parley.RoleAssistant, AgentID: "bot", Parts: parts, Content: content,
			Status: parley.StatusComplete, Turn: 1, TurnID: "m0", Finality: parley.FinalityNone, UpdatedSeq: 9, CreatedAt: now, UpdatedAt: now}
	}
	text := func(s string) parley.Part { return parley.Part{Type: parley.PartText, Text: s} }
	tool := parley.Part{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: parley.ToolCompleted, Args: json.RawMessage(`{"content":"x"}`)}
	finish := parley.Part{Type: parley.PartFinish, Reason: parley.FinishEndTurn}
	odd := "quotes \" back\\slash <b>&amp;</b> \n\t\r\b\f \x01 \u2028\u2029 é 日本 🎉 \x00"
	return []*parley.Message{
		base([]parley.Part{}, ""),
		base([]parley.Part{text("hello "), finish}, "hello "),
		base([]parley.Part{text("before "), tool, text("after"), finish}, "before after"),
		base([]parley.Part{text(odd), text(odd), finish}, odd+odd),
		base([]parley.Part{text("short"), finish}, "a longer final text"), // kept: not the parts' text
		base([]parley.Part{text("ab"), text("c")}, "abd"),
		base(nil, "posted without parts"),
	}
}

// TestRowsReadAsWritten: every row reads back to the message it was
// written from, its content included, with its size in JSON as clients
// read it; WireRow gives that JSON; the text is stored once when content
// is the parts' text.
func TestRowsReadAsWritten(t *testing.T) {
	for i, m := range rowCases() {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		row, err := EncodeRow(m)
		if err != nil {
			t.Fatal(err)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(row, &keys); err != nil {
			t.Fatal(err)
		}
		if _, kept := keys["content"]; kept == contentIsText(m) {
			t.Errorf("case %d: content is the parts' text: %v, but row %s", i, contentIsText(m), row)
		}
		var got parley.Message
		size, err := DecodeRow(row, &got)
		if err != nil {
			t.Fatal(err)
		}
		if enc, _ := json.Marshal(&got); !bytes.Equal(enc, want) {
			t.Errorf("case %d: read back\n%s\nwant\n%s", i, enc, want)
		}
		if size != len(want) {
			t.Errorf("case %d: size %d, want %d", i, size, len(want))
		}
		wire, err := WireRow(row)
		if err != nil || !bytes.Equal(wire, want) {
			t.Errorf("case %d: wire %s (%v), want %s", i, wire, err, want)
		}
		head, hsize, err := ReadRowHead(row)
		if err != nil {
			t.Fatal(err)
		}
		if hsize != len(want) || head.ID != m.ID || head.UpdatedSeq != m.UpdatedSeq || head.Content != "" || len(head.Parts) != 0 {
			t.Errorf("case %d: head %+v of size %d, want %d", i, head, hsize, len(want))
		}
	}
}

// TestJSONStringLen: the length of any string as encoding/json writes it.
func TestJSONStringLen(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\"", "\\", "<", ">", "&", "\n", "\b", "\f", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "🎉", "\xff", "\xe6", "日"}
	for range 2000 {
		var sb strings.Builder
		for range r.IntN(40) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		enc, _ := json.Marshal(s)
		if got := jsonStringLen(s); got != len(enc) {
			t.Fatalf("%q: %d, encoding/json wrote %d: %s", s, got, len(enc), enc)
		}
	}
}
