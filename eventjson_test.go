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
