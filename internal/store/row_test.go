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

// TestSkimmedHeadsAreDecodedHeads: ReadRowHead, which skims a row, gives
// the head and size that decoding the row whole gives, and WireRow the
// JSON that decoding and encoding it again gives, for rows of every
// shape (texts, tool calls with nested and escaped JSON, metadata, legacy
// marks, content kept or left out), and a spoiled row does not make it
// panic.
func TestSkimmedHeadsAreDecodedHeads(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "\"", "\\", "\\\"", "<", "&", "\n", "\x01", "é", "\u2028", "🎉", "{", "}", "[", "]", ",", ":", " ", "\\\\\"", "\xe6", "\x97", "\xa5", "\ufffd", `\ufffd`}
	str := func() string {
		var sb strings.Builder
		for range r.IntN(30) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		return sb.String()
	}
	var rows [][]byte
	for _, m := range rowCases() {
		row, _ := EncodeRow(m)
		rows = append(rows, row)
	}
	for range 3000 {
		m := rowCases()[0]
		m.ID, m.ReplyTo, m.Next = str(), str(), str()
		for range r.IntN(5) {
			switch r.IntN(3) {
			case 0:
				m.Parts = append(m.Parts, parley.Part{Type: parley.PartText, Text: str(), Streaming: r.IntN(2) == 0})
			case 1:
				args, _ := json.Marshal(map[string]any{str(): []any{str(), 1.5, nil, true, map[string]string{str(): str()}}})
				m.Parts = append(m.Parts, parley.Part{Type: parley.PartToolCall, CallID: str(), ToolName: "t", Status: parley.ToolRunning, Args: args, Error: str()})
			default:
				m.Parts = append(m.Parts, parley.Part{Type: parley.PartError, Message: str()})
			}
		}
		m.Content = parley.TextContent(m.Parts)
		if r.IntN(4) == 0 {
			m.Content = str() // kept in the row
		}
		if r.IntN(3) == 0 {
			m.Metadata, _ = json.Marshal(map[string]string{str(): str()})
		}
		if r.IntN(4) == 0 {
			m.Legacy = &parley.Legacy{Row: 3, SeenBy: []string{str()}}
		}
		if r.IntN(4) == 0 {
			m.Channel = &parley.Channel{Type: str(), ID: str()}
		}
		row, err := EncodeRow(m)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	for _, row := range rows {
		want, wsize, werr := readRowHead(row)
		got, gsize, gerr := ReadRowHead(row)
		if werr != nil || gerr != nil {
			t.Fatalf("row %s: %v, %v", row, werr, gerr)
		}
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if !bytes.Equal(w, g) || wsize != gsize {
			t.Fatalf("row %s\nskimmed to %s (%d bytes)\ndecoded to %s (%d bytes)", row, g, gsize, w, wsize)
		}
		wire, err := WireRow(row)
		decoded, derr := wireRow(row)
		if err != nil || derr != nil || !bytes.Equal(wire, decoded) {
			t.Fatalf("row %s\nmade the wire %s (%v)\ndecoded, %s (%v)", row, wire, err, decoded, derr)
		}
		// Spoiled (cut short, or a byte changed), a row is read without a
		// panic: rows are the store's own, which the skim trusts to be
		// JSON, and what it does not expect it leaves to the decoder.
		for range 20 {
			bad := bytes.Clone(row)
			if r.IntN(2) == 0 {
				bad = bad[:r.IntN(len(bad))]
			} else {
				bad[r.IntN(len(bad))] = "\"{}[],:\\ x1"[r.IntN(11)]
			}
			ReadRowHead(bad)
			WireRow(bad)
		}
	}
}

// BenchmarkReadRowHead measures the head and size of a row of about 1 MB
// (a text of 500 KB and a tool call of 470 KB), as a summary reads it.
//
//	go test -run '^$' -bench ReadRowHead ./store
func BenchmarkReadRowHead(b *testing.B) {
	args, _ := json.Marshal(map[string]string{"x": strings.Repeat("a", 470_000)})
	text := strings.Repeat("0123456789", 50_000)
	m := &parley.Message{ID: "m1", Role: parley.RoleAssistant, AgentID: "a", Parts: []parley.Part{{Type: parley.PartText, Text: text},
		{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: parley.ToolCompleted, Args: args}}, Content: text, Status: parley.StatusComplete}
	row, err := EncodeRow(m)
	if err != nil {
		b.Fatal(err)
	}
	for name, read := range map[string]func([]byte) (*parley.Message, int, error){"skimmed": ReadRowHead, "decoded": readRowHead} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(row)))
			for b.Loop() {
				if _, _, err := read(row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
