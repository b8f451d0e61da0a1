package conv_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestReadHead: the head Evolve reads from a message event without
// decoding it is what encoding/json reads, for messages as the server
// writes them and for JSON it does not write (nulls, numbers, keys in
// another case, escapes, keys given twice, invalid JSON).
func TestReadHead(t *testing.T) {
	m := parley.Message{ID: "m1", ConversationID: "c", Seq: 7, Role: parley.RoleAssistant, AgentID: "bot", Status: parley.StatusComplete,
		Next: "alice", Finality: parley.FinalityTurn, Content: "a \"quoted\" } ] text",
		Parts: []parley.Part{{Type: parley.PartText, Text: strings.Repeat("long text with } and \" and \\ ", 200)}, {Type: parley.PartToolCall, CallID: "c1", Args: json.RawMessage(`{"q":"x\"}"}`)}}}
	written, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{
		string(written),
		`{"id":"m2","status":"streaming"}`,
		`{"id":"m\u0033","agentId":"b\"ot","status":"complete","next":null}`,
		`{"id":"m4","next":5,"status":"complete"}`,
		`{"ID":"m5","Status":"canceled"}`,
		`{"id":"m6","id":"m7","finality":"conversation","finality":"turn"}`,
		`{"id":"m8","parts":[{"text":"x"}],"status":"complete"`,
		`not json`,
		`{}`,
	} {
		var want struct {
			ID       string `json:"id"`
			Status   string `json:"status"`
			Next     string `json:"next"`
			AgentID  string `json:"agentId"`
			Finality string `json:"finality"`
		}
		_ = json.Unmarshal([]byte(data), &want)
		if got := conv.ReadHead([]byte(data)); got != [5]string{want.ID, want.Status, want.Next, want.AgentID, want.Finality} {
			t.Errorf("ReadHead(%.60q) = %q; encoding/json reads %+v", data, got, want)
		}
	}
}
