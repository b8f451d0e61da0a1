package parley

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// fork copies a message the way the decider does: the struct and its parts.
func fork(m *Message) *Message {
	c := *m
	c.Parts = slices.Clone(m.Parts)
	return &c
}

// naive is what a message's text should be: its content and its parts'
// texts, built with plain strings.
type naive struct {
	content string
	parts   []string // "" marks a tool part
	open    bool     // the last part is a streaming text part
}

func (n *naive) text(d string) {
	n.content += d
	if n.open {
		n.parts[len(n.parts)-1] += d
	} else {
		n.parts, n.open = append(n.parts, d), true
	}
}

func (n *naive) tool() { n.parts, n.open = append(n.parts, ""), false }

func (n naive) fork() naive { n.parts = slices.Clone(n.parts); return n }

func check(t *testing.T, what string, m *Message, n naive) {
	t.Helper()
	if m.Content != n.content {
		t.Fatalf("%s: content %q, want %q", what, m.Content, n.content)
	}
	if len(m.Parts) != len(n.parts) {
		t.Fatalf("%s: %d parts, want %d", what, len(m.Parts), len(n.parts))
	}
	for i, p := range m.Parts {
		if p.Type == PartText && p.Text != n.parts[i] {
			t.Fatalf("%s: part %d is %q, want %q", what, i, p.Text, n.parts[i])
		}
	}
}

// TestAppendTextForks grows messages and copies of them at random, with
// tool calls between texts, and checks each against plain strings: a copy
// that grows never changes the message it came from, nor the other copies.
func TestAppendTextForks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type pair struct {
		m *Message
		n naive
	}
	live := []pair{{&Message{}, naive{}}}
	for step := range 20000 {
		i := r.IntN(len(live))
		p := &live[i]
		switch k := r.IntN(20); {
		case k == 0 && len(live) < 50:
			live = append(live, pair{fork(p.m), p.n.fork()})
		case k == 1:
			p.m.ApplyTool(Part{Type: PartToolCall, CallID: fmt.Sprint("c", step), Status: ToolRunning})
			p.n.tool()
		default:
			d := strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(40))
			p.m.AppendText(d)
			p.n.text(d)
		}
	}
	for i, p := range live {
		check(t, fmt.Sprint("message ", i), p.m, p.n)
	}
}

// TestAppendTextInPlace checks that a message that grows by many deltas
// keeps one buffer, not a copy of its text per delta: its content and its
// streaming part are the same bytes, and the buffer is at most a few times
// the text.
func TestAppendTextInPlace(t *testing.T) {
	m := &Message{}
	for range 5000 {
		m.AppendText("0123456789abcdef0123456789abcdef")
	}
	p := m.Parts[len(m.Parts)-1]
	if unsafe.StringData(p.Text) != unsafe.StringData(m.Content) {
		t.Error("the streaming part's text is not the content's bytes")
	}
	if m.text == nil || cap(m.text.b) > 4*len(m.Content) {
		t.Errorf("the text's buffer is not shared or too large (%v)", m.text != nil)
	}
	allocs := testing.AllocsPerRun(1000, func() { fork(m).AppendText("x") })
	// The fork's part slice, and (once) a new buffer, since every fork
	// grows from the same length and only the first may use the room.
	if allocs > 3 {
		t.Errorf("a delta on a copy allocates %.0f times", allocs)
	}
	grow := testing.AllocsPerRun(1000, func() { m.AppendText("x") })
	if grow > 0.1 {
		t.Errorf("a delta allocates %.2f times on average, want amortized near 0", grow)
	}
}

// TestAppendTextPartsMoveWithTheBuffer streams text between tool calls, as
// an agent does, until the text's buffer has moved many times: every text
// part, the closed ones too, is then bytes of the content's buffer, so that
// no outgrown buffer is kept alive by a part.
func TestAppendTextPartsMoveWithTheBuffer(t *testing.T) {
	m, n := &Message{}, naive{}
	for i := range 2000 {
		if i%50 == 49 {
			m.ApplyTool(Part{Type: PartToolCall, CallID: fmt.Sprint("call", i), ToolName: "t", Status: ToolRunning})
			n.tool()
			continue
		}
		d := fmt.Sprintf("delta %04d of the text;", i)
		m.AppendText(d)
		n.text(d)
	}
	check(t, "after 2000 deltas and tool calls", m, n)
	base := uintptr(unsafe.Pointer(unsafe.StringData(m.Content)))
	for i, p := range m.Parts {
		if p.Type != PartText {
			continue
		}
		at := uintptr(unsafe.Pointer(unsafe.StringData(p.Text)))
		if at < base || at+uintptr(len(p.Text)) > base+uintptr(len(m.Content)) {
			t.Fatalf("text part %d of %d is not bytes of the content's buffer: it keeps an outgrown buffer alive", i, len(m.Parts))
		}
	}
}

// TestAppendTextDecoded checks a message whose text did not come from
// AppendText (decoded from a stored row): it grows right, and shares from
// then on.
func TestAppendTextDecoded(t *testing.T) {
	content := strings.Repeat("x", 10)
	m := &Message{Content: content, Parts: []Part{{Type: PartText, Text: strings.Clone("xxxx"), Streaming: true}}}
	m.AppendText("yz")
	if m.Content != "xxxxxxxxxxyz" || m.Parts[0].Text != "xxxxyz" {
		t.Fatalf("got %q / %q", m.Content, m.Parts[0].Text)
	}
	// A part that is not the content's end (a message built by hand) grows
	// on its own.
	m = &Message{Content: "abc", Parts: []Part{{Type: PartText, Text: "zz", Streaming: true}}}
	m.AppendText("d")
	if m.Content != "abcd" || m.Parts[0].Text != "zzd" {
		t.Fatalf("got %q / %q", m.Content, m.Parts[0].Text)
	}
}

// TestAppendTextConcurrentForks grows copies of one message on several
// goroutines at once (run with -race): each ends with its own text.
func TestAppendTextConcurrentForks(t *testing.T) {
	base := &Message{}
	base.AppendText("hello ")
	var wg sync.WaitGroup
	got := make([]string, 8)
	for g := range got {
		wg.Go(func() {
			m := fork(base)
			for i := range 500 {
				m.AppendText(fmt.Sprint(g, ":", i, " "))
			}
			got[g] = m.Content
		})
	}
	wg.Wait()
	for g, s := range got {
		var want strings.Builder
		want.WriteString("hello ")
		for i := range 500 {
			fmt.Fprint(&want, g, ":", i, " ")
		}
		if s != want.String() {
			t.Errorf("copy %d: wrong text", g)
		}
	}
	if base.Content != "hello " {
		t.Errorf("the base changed: %q", base.Content)
	}
}

// TestTextContent checks that a message's text is its text parts in order,
// and that the text of one part is that part's own string, not a copy.
func TestTextContent(t *testing.T) {
	one := strings.Repeat("word ", 100)
	for _, c := range []struct {
		parts []Part
		want  string
	}{
		{nil, ""},
		{[]Part{{Type: PartToolCall, CallID: "c"}}, ""},
		{[]Part{{Type: PartText, Text: one}, {Type: PartToolCall, CallID: "c"}}, one},
		{[]Part{{Type: PartText, Text: "ab"}, {Type: PartToolCall, CallID: "c"}, {Type: PartText, Text: "cd"}}, "abcd"},
	} {
		if got := TextContent(c.parts); got != c.want {
			t.Errorf("TextContent(%v) = %q; want %q", c.parts, got, c.want)
		}
	}
	if got := TextContent([]Part{{Type: PartText, Text: one}}); unsafe.StringData(got) != unsafe.StringData(one) {
		t.Error("the text of one part was copied")
	}
}
