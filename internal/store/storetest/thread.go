package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testThreadsAreBounded builds a chain of eight messages, each a reply to
// the one before, of which some are large, and reads it within bounds:
// the nearest ancestors whole while they stay within MaxBytes and each is
// at most SummarizeOver, the others summarized (the size a summary gives
// is the whole message's in JSON); descendants up to the one that brings
// them to MaxBytes, then the next page after it.
func testThreadsAreBounded(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	large := map[string]bool{"m1": true, "m4": true}
	var ms []*parley.Message
	for i := range 8 {
		mid, parent := fmt.Sprint("m", i), ""
		if i > 0 {
			parent = fmt.Sprint("m", i-1)
		}
		m := message(id, mid, 0, parent, i)
		text := mid + strings.Repeat(" small", 10)
		if large[mid] {
			text = mid + strings.Repeat(" large & <escaped>", 2000)
		}
		m.Parts, m.Content = []parley.Part{{Type: parley.PartText, Text: text}}, text
		ms = append(ms, m)
	}
	appendMessages(t, s, id, 1, ms...)
	stored := map[string]int{} // the rows' sizes
	jsonSize := map[string]int{}
	for _, m := range ms {
		row, err := store.EncodeRow(m)
		if err != nil {
			t.Fatal(err)
		}
		whole, _ := json.Marshal(m)
		stored[m.ID], jsonSize[m.ID] = len(row), len(whole)
	}
	small := stored["m6"] // a small reply (m0, the root, is shorter: it has no replyTo)
	shown := func(list []*parley.Message) string {
		var out []string
		for _, m := range list {
			if m.Summarized != nil {
				if m.Summarized.Bytes != jsonSize[m.ID] || m.Content != "" || len(m.Parts) != 0 || m.Seq != ms[m.Depth].Seq || m.ReplyTo != ms[m.Depth].ReplyTo {
					t.Fatalf("the summary of %s is %+v; the message weighs %d bytes in JSON", m.ID, m, jsonSize[m.ID])
				}
				out = append(out, m.ID+"…")
				continue
			}
			if m.Content != ms[m.Depth].Content {
				t.Fatalf("%s is shown with other text", m.ID)
			}
			out = append(out, m.ID)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		name string
		p    store.ThreadParams
		want string
	}{
		{"no bounds", store.ThreadParams{}, "m0 m1 m2 m3 m4 m5 m6"},
		{"large ones summarized", store.ThreadParams{SummarizeOver: 4 * small}, "m0 m1… m2 m3 m4… m5 m6"},
		{"two messages' worth whole", store.ThreadParams{MaxBytes: jsonSize["m6"] + jsonSize["m5"], SummarizeOver: 4 * small}, "m0… m1… m2… m3… m4… m5 m6"},
		{"the nearest 4", store.ThreadParams{Limit: 4, SummarizeOver: 4 * small}, "m3 m4… m5 m6"},
		{"a budget that takes in a large message", store.ThreadParams{MaxBytes: jsonSize["m6"] + jsonSize["m5"] + jsonSize["m4"] + jsonSize["m3"]}, "m0… m1… m2… m3 m4 m5 m6"},
	} {
		c.p.ConversationID, c.p.MessageID = id, "m7"
		anc, err := s.Ancestors(ctx(t), c.p)
		if err != nil {
			t.Fatal(err)
		}
		if got := shown(anc); got != c.want {
			t.Errorf("ancestors of m7, %s: %s, want %s", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		after int64
		bytes int
		want  string
	}{
		{"no bound", 0, 0, "m1 m2 m3 m4 m5 m6 m7"},
		{"up to the message that reaches the bound", 0, jsonSize["m1"] + 1, "m1 m2"},
		{"a bound under the first message", 0, 1, "m1"},
		{"the next page", ms[2].Seq, jsonSize["m3"] + jsonSize["m4"], "m3 m4"},
		{"the last page", ms[4].Seq, 1 << 20, "m5 m6 m7"},
	} {
		desc, err := s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "m0", After: c.after, Limit: 100, MaxBytes: c.bytes})
		if err != nil {
			t.Fatal(err)
		}
		if got := shown(desc); got != c.want {
			t.Errorf("descendants of m0, %s: %s, want %s", c.name, got, c.want)
		}
	}
}
