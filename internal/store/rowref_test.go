package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/parleyhq/parley"
)

// TestEncodeAppendRefs: an append's event is stored as a reference to the
// row it writes only when the message has ended, the event is the row's
// last writer (a message or message.updated at the row's seq) and the row
// gives back its data exactly; of a message written twice, its last row
// counts; an import's events are never references. Every row of rowCases,
// the ones that keep their content too, is such a row.
func TestEncodeAppendRefs(t *testing.T) {
	ev := func(seq int64, typ string, m any) parley.Event {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return parley.Event{ConversationID: "c1", Seq: seq, Type: typ, Finality: parley.FinalityNone, Data: data}
	}
	chunk := func(seq int64) parley.Event {
		return ev(seq, parley.EventChunk, parley.Chunk{MessageID: "m1", Content: "x"})
	}
	// ended returns a copy of the rowCases message i, ended by the event at seq 9.
	ended := func(i int) *parley.Message { m := *rowCases()[i]; return &m }
	streaming := func() *parley.Message { m := ended(1); m.Status = parley.StatusStreaming; return m }
	otherData := func() *parley.Message { m := ended(1); m.Content = "what the event said"; return m }

	type tc struct {
		name     string
		events   []parley.Event // after seq 7
		messages []*parley.Message
		want     string // the refs, "" for none
	}
	var cases []tc
	for i := range rowCases() {
		m := ended(i)
		if raw, _ := json.Marshal(m); parley.HasNUL(raw) {
			continue // no append takes it (TestEncodeAppendRefusesNUL); EncodeRow still reads rows stored before
		}
		cases = append(cases, tc{fmt.Sprintf("ended by message.updated, row %d", i), []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, m)}, []*parley.Message{m}, "[ m1]"})
	}
	posted := ended(1)
	posted.UpdatedSeq = 0
	postedAt8 := *posted
	postedAt8.Seq = 8
	cases = append(cases,
		tc{"posted whole", []parley.Event{ev(8, parley.EventMessage, &postedAt8)}, []*parley.Message{&postedAt8}, "[m1]"},
		tc{"still streaming", []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, streaming())}, []*parley.Message{streaming()}, ""},
		tc{"the event says other than the row", []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, otherData())}, []*parley.Message{ended(1)}, ""},
		tc{"a chunk at the row's seq", []parley.Event{chunk(8), chunk(9)}, []*parley.Message{ended(1)}, ""},
		tc{"the row's seq is not in the append", []parley.Event{chunk(8)}, []*parley.Message{ended(1)}, ""},
		tc{"no rows", []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, ended(1))}, nil, ""},
		tc{"checkpoint, then ended", []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, ended(1))}, []*parley.Message{streaming(), ended(1)}, "[ m1]"},
		tc{"ended, then written again streaming", []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, ended(1))}, []*parley.Message{ended(1), streaming()}, ""},
	)
	cases = append(cases, tc{"an import", []parley.Event{chunk(8), ev(9, parley.EventMessageUpdated, ended(1))}, []*parley.Message{ended(1)}, ""})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := AppendParams{ConversationID: "c1", ExpectSeq: 7, Events: c.events, Messages: c.messages}
			if c.name == "an import" {
				p.Import = &ImportLease{Owner: "o"}
			}
			got, err := EncodeAppend(&p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Rows) != len(c.messages) {
				t.Fatalf("%d rows for %d messages", len(got.Rows), len(c.messages))
			}
			for i, m := range c.messages {
				want, _ := EncodeRow(m)
				if string(got.Rows[i]) != string(want) {
					t.Fatalf("row %d is %s, want %s", i, got.Rows[i], want)
				}
			}
			refs := ""
			if got.Refs != nil {
				var each []string
				for i := range c.events {
					each = append(each, got.Ref(i))
				}
				refs = fmt.Sprint(each)
			}
			if refs != c.want {
				t.Fatalf("refs %q, want %q", refs, c.want)
			}
		})
	}
}

// TestEncodeAppendRefusesNUL: an append whose events or rows hold U+0000
// is refused before anything is encoded for a store.
func TestEncodeAppendRefusesNUL(t *testing.T) {
	m := &parley.Message{ID: "m1", Content: "a\x00", Parts: []parley.Part{{Type: parley.PartText, Text: "a\x00"}}}
	for name, p := range map[string]AppendParams{
		"a row":         {Events: []parley.Event{{Seq: 1, Type: parley.EventTrace, Data: []byte(`{}`)}}, Messages: []*parley.Message{m}},
		"an event":      {Events: []parley.Event{{Seq: 1, Type: parley.EventTrace, Data: []byte(`{"a":"\u0000"}`)}}},
		"a state":       {Events: []parley.Event{{Seq: 1, Type: parley.EventTrace, Data: []byte(`{}`)}}, State: []byte(`{"a":"\u0000"}`)},
		"a turn id":     {Events: []parley.Event{{Seq: 1, Type: parley.EventTrace, TurnID: "a\x00", Data: []byte(`{}`)}}},
		"invalid UTF-8": {Events: []parley.Event{{Seq: 1, Type: parley.EventTrace, AgentID: "a\xff", Data: []byte(`{}`)}}},
	} {
		if _, err := EncodeAppend(&p); parley.ErrorCode(err) != parley.EINVALIDVALUE {
			t.Errorf("%s: %v, want invalid_value", name, err)
		}
	}
}
