package parley_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley"
)

// plainEvent is parley.Event without its MarshalJSON: what encoding/json
// writes by reflection.
type plainEvent struct {
	ConversationID string          `json:"conversationId"`
	Seq            int64           `json:"seq"`
	Type           string          `json:"type"`
	Turn           int             `json:"turn"`
	TurnID         string          `json:"turnId,omitempty"`
	AgentID        string          `json:"agentId,omitempty"`
	Finality       parley.Finality `json:"finality"`
	Time           parley.Time     `json:"ts"`
	Data           json.RawMessage `json:"data"`
}

// FuzzEventJSON: AppendJSON writes what json.Marshal writes by reflection,
// whatever the strings hold, for data as the log stores it (compact and
// HTML-escaped).
func FuzzEventJSON(f *testing.F) {
	f.Add("c1", int64(7), "chunk", 3, "p1", "bot", "none", int64(1795600000123), `{"messageId":"r1","content":"a<b & \"c\"\n"}`)
	f.Add("", int64(0), "", 0, "", "", "", int64(0), ``)
	f.Add("\u2028\x00\xff", int64(-1), "é", -5, "\t", "<>&", "\\", int64(1), `[1, 2, "<"]`)
	f.Fuzz(func(t *testing.T, conv string, seq int64, typ string, turn int, turnID, agent, fin string, ms int64, data string) {
		stored, err := json.Marshal(json.RawMessage(data)) // compact, HTML-escaped: as stored
		if err != nil || data == "" {
			stored = nil
		}
		var ts parley.Time
		if ms != 0 {
			ts = parley.NewTime(time.UnixMilli(ms % (1 << 44)))
		}
		e := parley.Event{ConversationID: conv, Seq: seq, Type: typ, Turn: turn, TurnID: turnID, AgentID: agent, Finality: parley.Finality(fin), Time: ts, Data: stored}
		want, err := json.Marshal(plainEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON\n%s\njson.Marshal\n%s", got, want)
		}
		if got, err := json.Marshal(e); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("json.Marshal with MarshalJSON\n%s (%v)\nby reflection\n%s", got, err, want)
		}
	})
}

// FuzzChunkJSON: Chunk.AppendJSON writes what json.Marshal writes, and
// ParseChunk reads back what was written (and any chunk JSON as
// encoding/json reads it).
func FuzzChunkJSON(f *testing.F) {
	f.Add("r1", "Hello, <world> & \"friends\"\n", true)
	f.Add("", "", false)
	f.Add("m", "\xff\u2028é\\", false)
	f.Fuzz(func(t *testing.T, id, content string, checkpoint bool) {
		c := parley.Chunk{MessageID: id, Content: content, Checkpoint: checkpoint}
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got := c.AppendJSON(nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON\n%s\njson.Marshal\n%s", got, want)
		}
		var wantBack parley.Chunk
		if err := json.Unmarshal(want, &wantBack); err != nil {
			t.Fatal(err)
		}
		back, err := parley.ParseChunk(got)
		if err != nil || back != wantBack {
			t.Fatalf("ParseChunk(%s) = %+v, %v; encoding/json reads %+v", got, back, err, wantBack)
		}
		// Other JSON of a chunk (another order, spaces) is read as
		// encoding/json reads it.
		idJSON, _ := json.Marshal(id)
		contentJSON, _ := json.Marshal(content)
		other := []byte(`{ "content": ` + string(contentJSON) + `, "messageId": ` + string(idJSON) + `}`)
		if back, err := parley.ParseChunk(other); err != nil || back != (parley.Chunk{MessageID: wantBack.MessageID, Content: wantBack.Content}) {
			t.Fatalf("ParseChunk(%s) = %+v, %v", other, back, err)
		}
	})
}

// TestAppendEventIsMarshal holds AppendJSON, with which an export writes
// the log's events, to what json.Marshal writes by reflection, for plain
// and awkward strings alike.
func TestAppendEventIsMarshal(t *testing.T) {
	t.Parallel()
	at := parley.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 123_000_000, time.UTC))
	for _, e := range []parley.Event{
		{ConversationID: "c", Seq: 1, Type: parley.EventConversationCreated, Finality: parley.FinalityNone, Time: at, Data: json.RawMessage(`{"id":"c"}`)},
		{ConversationID: "c", Seq: 2, Type: parley.EventMessage, Turn: 3, TurnID: "t-1", AgentID: "a", Finality: parley.FinalityTurn, Time: at, Data: json.RawMessage(`{"x":"\u003c"}`)},
		{ConversationID: "c<&>\"\\\n", Seq: 3, Type: "é", TurnID: "\u2028", AgentID: "a\x00", Finality: parley.FinalityNone, Time: at, Data: json.RawMessage(`[1,2]`)},
		{ConversationID: "c", Seq: 4, Type: parley.EventChunk, Finality: parley.FinalityNone},
	} {
		want, err := json.Marshal(plainEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON:\n%s\nwant\n%s", got, want)
		}
	}
}
