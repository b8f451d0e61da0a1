package transfer_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/transfer"
)

// boundsFile is a Parley export (JSON Lines) of conversation "b", made at
// boundsT0 by header (the conversation's fields after its id), whose events
// after conversation.created are events and whose message rows are rows.
// An event is its JSON fields but seq and conversationId; "{seq}" in an
// event or a row stands for the event's seq.
func boundsFile(header string, events []string, rows ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"parley":"export","version":1,"conversation":{"id":"b",%s"participants":["a"],"createdAt":%q},"lastSeq":%d}`+"\n", header, boundsT0, len(events)+1)
	fmt.Fprintf(&b, `{"event":{"seq":1,"type":"conversation.created","turn":0,"finality":"none","ts":%q,"data":{}}}`+"\n", boundsT0)
	for i, e := range events {
		seq := fmt.Sprint(i + 2)
		fmt.Fprintf(&b, `{"event":{"seq":%s,%s}}`+"\n", seq, strings.ReplaceAll(e, "{seq}", seq))
	}
	for _, r := range rows {
		fmt.Fprintf(&b, `{"message":%s}`+"\n", r)
	}
	return b.Bytes()
}

const boundsT0 = "2026-11-22T12:00:00.000Z"

// ev is an event of boundsFile at boundsT0.
func ev(typ string, turn int, agent, finality, data string) string {
	return fmt.Sprintf(`"type":%q,"turn":%d,"agentId":%q,"finality":%q,"ts":%q,"data":%s`, typ, turn, agent, finality, boundsT0, data)
}

// msg is a message of agent a in turn, with more fields (each followed by
// a comma); its seq is the event's ({seq}).
func msg(id string, turn int, status, more string) string {
	return fmt.Sprintf(`{"id":%q,"seq":{seq},"role":"assistant","agentId":"a",%s"parts":[],"content":"","status":%q,"turn":%d,"depth":0,"finality":"none","createdAt":%q,"updatedAt":%q}`,
		id, more, status, turn, boundsT0, boundsT0)
}

// delegations are n delegations by a into turn 1, to w1, w2, …
func delegations(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ev("delegation", 1, "a", "none", fmt.Sprintf(`{"from":"a","to":"w%d","turn":1}`, i+1))
	}
	return out
}

// repeat is n copies of event e.
func repeat(n int, e string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e
	}
	return out
}

// TestImportsOverTheBounds: an import is held to every bound a live write
// is (the default limits here): a file that breaks one is refused whole,
// with the status a live write would get and saying which row and which
// bound, and leaves nothing behind.
func TestImportsOverTheBounds(t *testing.T) {
	t.Parallel()
	quoted := func(n int) string { return `"` + strings.Repeat("x", n) + `"` }
	opened := ev("message", 1, "a", "none", msg("m0", 1, "complete", ""))
	streaming := func(id string) string { return ev("message", 1, "a", "none", msg(id, 1, "streaming", "")) }
	row := func(m string) string { return strings.Replace(m, "{seq}", "2", 1) }
	ok := boundsFile("", []string{opened, ev("trace", 1, "a", "none", `{"id":"t1","payload":{"n":1}}`)}, row(msg("m0", 1, "complete", "")))
	if _, err := transfer.Import(ctxT(t), sqliteEngine(t), bytes.NewReader(ok), transfer.ImportOptions{}); err != nil {
		t.Fatalf("the file the cases start from is refused: %v", err)
	}
	runBadImports(t, []badImport{
		{"a turn past the int range", parley.EINVALIDVALUE, "row 3: event 2 (message): turn 9223372036854775807",
			boundsFile("", []string{ev("message", math.MaxInt, "a", "none", msg("m1", math.MaxInt, "complete", ""))})},
		{"a turn that skips", parley.EINVALIDVALUE, "turn 3", boundsFile("", []string{opened, ev("trace", 3, "a", "none", `{"payload":{}}`)})},
		{"257 queued prompts", parley.ETOOLARGE, "row 259: event 258 (prompt.queued): the prompt queue would hold 257 prompts; the limit is 256",
			boundsFile("", repeat(257, ev("prompt.queued", 0, "alice", "none", `{"id":"p{seq}","content":"hi","mode":"followup","until":null}`)))},
		{"a 17 KiB trace", parley.ETOOLARGE, "trace payload is 17410 bytes; the limit is 16384",
			boundsFile("", []string{opened, ev("trace", 1, "a", "none", `{"id":"t1","payload":`+quoted(17<<10)+`}`)})},
		{"a claim for a day", parley.EINVALIDVALUE, "claim ttl 24h0m0s",
			boundsFile("", []string{ev("turn.claimed", 1, "a", "none", `{"agentId":"a","turn":1,"expiresAt":"2026-11-23T12:00:00.000Z"}`)})},
		{"a collect prompt for a year", parley.EINVALIDVALUE, "collect window",
			boundsFile("", []string{ev("prompt.queued", 0, "alice", "none", `{"id":"p1","content":"hi","mode":"collect","until":"2027-11-22T12:00:00.000Z"}`)})},
		{"33 messages streaming at once", parley.ETOOLARGE, "row 35: event 34 (message): message s34 would be one more streaming at once than the 32",
			boundsFile("", repeat(33, streaming("s{seq}")))},
		{"a chunk past the text limit", parley.ETOOLARGE, "more than 524288 bytes of text",
			boundsFile("", []string{streaming("s1"), ev("chunk", 1, "a", "none", `{"messageId":"s1","content":`+quoted(512<<10+1)+`}`)})},
		{"a chunk of a message not streaming", parley.EINVALIDVALUE, "not streaming",
			boundsFile("", []string{opened, ev("chunk", 1, "a", "none", `{"messageId":"m0","content":"more"}`)})},
		{"a tool update with a long status", parley.EINVALIDVALUE, "status and reason at most 16",
			boundsFile("", []string{streaming("s1"), ev("part.updated", 1, "a", "none", `{"messageId":"s1","part":{"type":"tool-call","callId":"c","toolName":"t","status":`+quoted(17)+`}}`)})},
		{"a thread too deep", parley.EINVALIDTHREAD, "depth 100",
			boundsFile("", []string{opened, ev("message", 1, "a", "none", strings.Replace(msg("m1", 1, "complete", `"replyTo":"m0",`), `"depth":0`, `"depth":100`, 1))})},
		{"metadata over the limit", parley.ETOOLARGE, "metadata is 16386 bytes",
			boundsFile("", []string{ev("message", 1, "a", "none", msg("m1", 1, "complete", `"metadata":`+quoted(16<<10)+`,`))})},
		{"a part with a long reason", parley.EINVALIDVALUE, "parts[0]",
			boundsFile("", []string{ev("message", 1, "a", "none", strings.Replace(msg("m1", 1, "complete", ""), `"parts":[]`, `"parts":[{"type":"text","text":"hi","reason":`+quoted(100)+`}]`, 1))})},
		{"an abort with a long reason", parley.ETOOLARGE, "reason is 1025 bytes",
			boundsFile("", []string{opened, ev("turn.aborted", 1, "a", "turn", `{"turn":1,"reason":`+quoted(1025)+`}`)})},
		{"a revert of 10001 messages", parley.ETOOLARGE, "1 to 10000 messages, not 10001",
			boundsFile("", []string{ev("messages.removed", 0, "a", "none", `{"messageIds":[`+strings.TrimSuffix(strings.Repeat(`"m",`, 10001), ",")+`]}`)})},
		{"a delegation to nobody", parley.EINVALIDVALUE, "delegation",
			boundsFile("", []string{opened, ev("delegation", 1, "a", "none", `{"from":"a","to":"","turn":1}`)})},
		{"an event in the future", parley.EINVALIDVALUE, "future",
			boundsFile("", []string{strings.Replace(opened, boundsT0, "2999-01-01T00:00:00.000Z", 1)})},
		{"an agent id that is no id", parley.EINVALIDVALUE, "agent id",
			boundsFile("", []string{ev("prompt.queued", 0, strings.Repeat("a", 129), "none", `{"id":"p1","content":"hi","mode":"followup","until":null}`)})},
		{"a prompt from a channel with no type", parley.EINVALIDVALUE, "channel",
			boundsFile("", []string{ev("prompt.queued", 0, "alice", "none", `{"id":"p1","content":"hi","mode":"followup","channel":{"type":"","id":"C1"},"until":null}`)})},
		{"an event after the close", parley.EINVALID, "closed",
			boundsFile("", []string{ev("message", 1, "a", "conversation", strings.Replace(msg("m1", 1, "complete", ""), `"finality":"none"`, `"finality":"conversation"`, 1)),
				ev("trace", 0, "a", "none", `{"payload":{}}`)})},
		{"a creator that is no id", parley.EINVALIDVALUE, "createdBy", boundsFile(`"createdBy":"not an id",`, []string{opened})},
		{"a row over the text limit", parley.ETOOLARGE, `row 4: message "m0": the message's text is 524289 bytes`,
			boundsFile("", []string{opened}, row(strings.Replace(msg("m0", 1, "complete", ""), `"parts":[]`, `"parts":[{"type":"text","text":`+quoted(512<<10+1)+`}]`, 1)))},
		{"a row in a later turn", parley.EINVALIDVALUE, "turn 7", boundsFile("", []string{opened}, row(msg("m0", 7, "complete", "")))},
		{"a row streaming that the log ended", parley.EINVALIDVALUE, "status streaming", boundsFile("", []string{opened}, row(msg("m0", 1, "streaming", "")))},
		{"a row seen by 65 agents", parley.ETOOLARGE, "seenBy", boundsFile("", []string{opened},
			row(msg("m0", 1, "complete", `"legacy":{"row":1,"seenBy":[`+strings.TrimSuffix(strings.Repeat(`"b",`, 65), ",")+`]},`)))},
		{"65 delegates in one turn", parley.ETOOLARGE, "turn 1 would have 65 delegates; the limit is 64",
			boundsFile("", append([]string{opened}, delegations(65)...))},
		{"a NUL in a trace", parley.EINVALIDVALUE, "U+0000",
			boundsFile("", []string{opened, ev("trace", 1, "a", "none", `{"id":"t1","payload":{"k":"a\u0000"}}`)})},
		{"a NUL in a prompt", parley.EINVALIDVALUE, "U+0000",
			boundsFile("", []string{ev("prompt.queued", 0, "alice", "none", `{"id":"p1","content":"a\u0000","mode":"followup","until":null}`)})},
		{"two messages under one id", parley.EBUSY, `"m0"`,
			boundsFile("", []string{opened, ev("message", 1, "a", "none", msg("m0", 1, "complete", ""))})},
		{"a prompt under a message's id", parley.EBUSY, `"m0"`,
			boundsFile("", []string{opened, ev("prompt.queued", 0, "alice", "none", `{"id":"m0","content":"hi","mode":"followup","until":null}`)})},
	})
}
