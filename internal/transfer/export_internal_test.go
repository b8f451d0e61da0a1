package transfer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley"
)

// TestAppendEventIsMarshal holds the export's hand-written event encoding
// to what json.Marshal writes, for plain and awkward strings alike.
func TestAppendEventIsMarshal(t *testing.T) {
	t.Parallel()
	at := parley.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 123_000_000, time.UTC))
	for _, e := range []parley.Event{
		{ConversationID: "c", Seq: 1, Type: parley.EventConversationCreated, Finality: parley.FinalityNone, Time: at, Data: json.RawMessage(`{"id":"c"}`)},
		{ConversationID: "c", Seq: 2, Type: parley.EventMessage, Turn: 3, TurnID: "t-1", AgentID: "a", Finality: parley.FinalityTurn, Time: at, Data: json.RawMessage(`{"x":"\u003c"}`)},
		{ConversationID: "c<&>\"\\\n", Seq: 3, Type: "é", TurnID: "\u2028", AgentID: "a\x00", Finality: parley.FinalityNone, Time: at, Data: json.RawMessage(`[1,2]`)},
		{ConversationID: "c", Seq: 4, Type: parley.EventChunk, Finality: parley.FinalityNone},
	} {
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEvent(nil, &e); string(got) != string(want) {
			t.Errorf("appendEvent:\n%s\nwant\n%s", got, want)
		}
	}
}
