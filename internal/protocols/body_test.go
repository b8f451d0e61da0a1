package protocols

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley"
)

// TestLastOfKeepsOnlyTheLast: both protocols' messages are decoded by one
// decoder, which keeps the last message, counts them, and names each
// protocol's messages in its refusals.
func TestLastOfKeepsOnlyTheLast(t *testing.T) {
	var chat chatRequest
	if err := json.Unmarshal([]byte(`{"id":"c","messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"a"}]},{"id":"2","role":"user","parts":[{"type":"text","text":"b"}]}]}`), &chat); err != nil {
		t.Fatal(err)
	}
	if chat.Messages.count != 2 || chat.Messages.last.ID != "2" {
		t.Fatalf("kept %+v of %d", chat.Messages.last, chat.Messages.count)
	}
	var run runAgentInput
	if err := json.Unmarshal([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"a"}]}`), &run); err != nil {
		t.Fatal(err)
	}
	if run.Messages.count != 1 || run.Messages.last.ID != "1" {
		t.Fatalf("kept %+v of %d", run.Messages.last, run.Messages.count)
	}
	for _, c := range []struct {
		v    any
		body string
		want string
	}{
		{&chatRequest{}, `{"messages":{}}`, "messages must be an array of UI messages"},
		{&chatRequest{}, `{"messages":[{"id":"1"},{"id":2}]}`, "messages[1] is not a UI message {id, role, parts}: cannot unmarshal number into Go struct field uiMessage.id of type string"},
		{&runAgentInput{}, `{"messages":"x"}`, "messages must be an array of AG-UI messages"},
		{&runAgentInput{}, `{"messages":[{"role":1}]}`, "messages[0] is not an AG-UI message {id, role, content}: cannot unmarshal number into Go struct field aguiMessage.role of type string"},
	} {
		err := json.Unmarshal([]byte(c.body), c.v)
		if parley.ErrorCode(err) != parley.EINVALID || parley.ErrorMessage(err) != c.want {
			t.Errorf("%s: %v; want %q", c.body, err, c.want)
		}
	}
}
