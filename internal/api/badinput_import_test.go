package api_test

// The bad-input suite's imports: files that break a bound a live write is
// held to. Same fixture and checks as badinput_test.go: each case's status,
// code and message, and nothing written.

import (
	"fmt"
	"strings"
	"testing"
)

// importFile is a Parley export (JSON Lines) of conversation "imp" whose
// events after conversation.created are events: each its fields but seq
// and conversationId, all at one time; "{seq}" stands for the event's seq.
func importFile(events ...string) string {
	const at = `"ts":"2026-11-22T12:00:00.000Z"`
	var b strings.Builder
	fmt.Fprintf(&b, `{"parley":"export","version":1,"conversation":{"id":"imp","participants":["alice"],"createdAt":"2026-11-22T12:00:00.000Z"},"lastSeq":%d}`+"\n", len(events)+1)
	b.WriteString(`{"event":{"seq":1,"type":"conversation.created","turn":0,"finality":"none",` + at + `,"data":{}}}` + "\n")
	for i, e := range events {
		seq := fmt.Sprint(i + 2)
		fmt.Fprintf(&b, `{"event":{"seq":%s,%s,%s}}`+"\n", seq, at, strings.ReplaceAll(e, "{seq}", seq))
	}
	return b.String()
}

// importMessage is the fields of a message event of alice in turn, with
// more fields of the message (each followed by a comma).
func importMessage(id string, turn int, status, more string) string {
	return fmt.Sprintf(`"type":"message","turn":%d,"agentId":"alice","finality":"none","data":{"id":%q,"seq":{seq},"role":"assistant","agentId":"alice",%s"parts":[],"content":"","status":%q,"turn":%d,"depth":0,"finality":"none","createdAt":"2026-11-22T12:00:00.000Z","updatedAt":"2026-11-22T12:00:00.000Z"}`,
		turn, id, more, status, turn)
}

// TestBadImportBounds: an import is held to the bounds a live write is
// (the fixture's small ones), refused whole with the status a live write
// would get, saying which row and which bound, and writes nothing.
func TestBadImportBounds(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	imp := func(name string, status int, code, says string, events ...string) badCase {
		return badCase{"import " + name, "POST", "/v1/conversations/import", "admin", importFile(events...), nil, status, code, says}
	}
	queued := `"type":"prompt.queued","turn":0,"agentId":"alice","finality":"none","data":{"id":"p{seq}","content":"hi","mode":"followup","until":null}`
	opened := importMessage("m0", 1, "complete", "")
	f.run(t, []badCase{
		imp("a turn past the int range", 422, "invalid_value", "row 3: event 2 (message): turn 9223372036854775807",
			importMessage("m1", 9223372036854775807, "complete", "")),
		imp("more prompts queued than the queue holds", 413, "too_large", "row 5: event 4 (prompt.queued): the prompt queue would hold 3 prompts; the limit is 2",
			queued, queued, queued),
		imp("a trace over the limit", 413, "too_large", "trace payload is 602 bytes; the limit is 512",
			opened, `"type":"trace","turn":1,"agentId":"alice","finality":"none","data":{"id":"t1","payload":"`+strings.Repeat("x", 600)+`"}`),
		imp("more messages streaming than may at once", 413, "too_large", "one more streaming at once than the 1",
			importMessage("s1", 1, "streaming", ""), importMessage("s2", 1, "streaming", "")),
		imp("a thread too deep", 422, "invalid_thread", "depth 3",
			opened, strings.Replace(importMessage("m1", 1, "complete", `"replyTo":"m0",`), `"depth":0`, `"depth":3`, 1)),
		imp("a message over the text limit", 413, "too_large", "text is 4097 bytes",
			strings.Replace(importMessage("m1", 1, "complete", ""), `"parts":[]`, `"parts":[{"type":"text","text":"`+strings.Repeat("x", badTextLimit+1)+`"}]`, 1)),
		// Live too, a part's fields that no size counts are bounded.
		{"a part with a long status", "POST", "/v1/conversations/{c3}/messages", "alice", `{"parts":[{"type":"text","text":"hi","status":"` + strings.Repeat("s", 17) + `"}]}`, nil, 422, "invalid_value", "status and reason at most 16"},
		// Live, a prompt from a channel the rules would refuse could never
		// be dispatched: the queue would wait behind it.
		{"a prompt from a malformed channel", "POST", "/v1/conversations/{c3}/prompts", "admin", `{"agentId":"alice","content":"hi","channel":{"type":"a b","id":"c"}}`, nil, 422, "invalid_value", "channel"},
	})
}
