package transfer_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/transfer"
)

// TestLegacyImport imports seed 004's agent memory rows: copies of one
// message in several memories become one message seen by those agents, and
// every oddity (no id, no replyTo, a missing parent, a self reply, time
// going backwards, two chats) is a warning, never a silent change.
func TestLegacyImport(t *testing.T) {
	t.Parallel()
	rows, err := os.ReadFile("testdata/legacy.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for name, input := range map[string][]byte{"jsonl": rows, "json-array": jsonArray(rows)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eng := sqliteEngine(t)
			res := must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), eng, bytes.NewReader(input), transfer.ImportOptions{ID: "old"}))
			var got []string
			for _, w := range res.Warnings {
				got = append(got, fmt.Sprintf("%d %s %s", w.Row, w.Kind, w.MessageID))
			}
			want := []string{
				"5 no-reply-to msg-3",
				"6 no-id legacy-6",
				"7 no-id legacy-7",
				"7 no-reply-to legacy-7",
				"8 no-id legacy-8",
				"9 missing-parent msg-9",
				"10 out-of-order msg-10",
				"10 self-reply msg-10",
				"11 chats-merged msg-11",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if res.Source != "legacy" || res.Messages != 9 || res.Events != 10 {
				t.Fatalf("result: %+v", res)
			}
			ctx := ctxT(t)
			m1 := must[*parley.Message](t)(storeOf(eng).GetMessage(ctx, "old", "msg-1"))
			if m1.AgentID != "HUMAN" || m1.Role != parley.RoleUser || strings.Join(m1.Legacy.SeenBy, ",") != "a1,a2" {
				t.Fatalf("msg-1: %+v %+v", m1, m1.Legacy)
			}
			m2 := must[*parley.Message](t)(storeOf(eng).GetMessage(ctx, "old", "msg-2"))
			if m2.Role != parley.RoleAssistant || m2.ReplyTo != "msg-1" || m2.Depth != 1 || m2.TurnID != "msg-1" {
				t.Fatalf("msg-2: %+v", m2)
			}
			m9 := must[*parley.Message](t)(storeOf(eng).GetMessage(ctx, "old", "msg-9"))
			if m9.ReplyTo != "msg-lost" || m9.Depth != 0 {
				t.Fatalf("msg-9 keeps its missing parent: %+v", m9)
			}
			if m10 := must[*parley.Message](t)(storeOf(eng).GetMessage(ctx, "old", "msg-10")); m10.ReplyTo != "" || m10.Turn != m9.Turn {
				t.Fatalf("msg-10 continues a1's turn without its self reply: %+v", m10)
			}

			md := string(export(t, eng, "old", transfer.Markdown))
			wantLabels := []string{
				"From: HUMAN · To: a1, a2",
				"Agent: a1 (reply to HUMAN)",
				"Agent: a2",
				"From: HUMAN · To: a1",                     // answered, by the heuristic
				"Agent: a1",                                //
				"From: HUMAN · To: a2 " + transfer.NoReply, // a2 never wrote after it
				"Agent: a1 (reply to missing message msg-lost)",
				"Agent: a1",
				"Agent: a1 (message from a2) " + transfer.NoReply,
			}
			if got := labels(t, []byte(md)); strings.Join(got, "\n") != strings.Join(wantLabels, "\n") {
				t.Fatalf("labels:\n%s\nwant:\n%s\n\n%s", strings.Join(got, "\n"), strings.Join(wantLabels, "\n"), md)
			}
			if !strings.Contains(md, "the timestamp heuristic decided 3 messages") {
				t.Fatalf("the heuristic count is missing:\n%s", md)
			}

			// An export of the imported conversation imports again, the same.
			first := export(t, eng, "old", transfer.JSONL)
			again := sqliteEngine(t)
			must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), again, bytes.NewReader(first), transfer.ImportOptions{}))
			if second := export(t, again, "old", transfer.JSONL); !bytes.Equal(withoutEpoch(first), withoutEpoch(second)) {
				t.Fatalf("re-import differs:\n%s\n%s", first, second)
			}
		})
	}
}

func jsonArray(jsonl []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(jsonl), []byte("\n"))
	return append(append([]byte("[\n"), bytes.Join(lines, []byte(",\n"))...), "\n]"...)
}

// TestLegacyCopyAfterABatch finds another agent's copy of a message that was
// already written in an earlier batch: the row is updated, and the log says
// so with a message.updated event.
func TestLegacyCopyAfterABatch(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(`{"agentId":"a1","role":"user","sender":"HUMAN","content":"first","messageId":"first","createdAt":"2025-10-25T10:00:00Z"}` + "\n")
	for i := range 1500 {
		fmt.Fprintf(&b, `{"agentId":"a1","role":"assistant","sender":"a1","content":"n%d","messageId":"m%d","replyToMessageId":"first","createdAt":"2025-10-25T10:00:01Z"}`+"\n", i, i)
	}
	b.WriteString(`{"agentId":"a2","role":"user","sender":"HUMAN","content":"first","messageId":"first","createdAt":"2025-10-25T10:00:00Z"}` + "\n")
	eng := sqliteEngine(t)
	res := must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), eng, &b, transfer.ImportOptions{ID: "big"}))
	if res.Messages != 1501+1 || res.Events != 1+1501+1 {
		t.Fatalf("result: %+v", res.ImportStats)
	}
	first := must[*parley.Message](t)(storeOf(eng).GetMessage(ctxT(t), "big", "first"))
	if strings.Join(first.Legacy.SeenBy, ",") != "a1,a2" {
		t.Fatalf("seenBy = %v", first.Legacy.SeenBy)
	}
	jsonl := export(t, eng, "big", transfer.JSONL)
	if n := bytes.Count(jsonl, []byte(`"type":"message.updated"`)); n != 1 {
		t.Fatalf("%d message.updated events, want 1", n)
	}
}

// TestLegacyThreadTooDeep: legacy rows that reply one to the other further
// than a live reply may go (-max-thread-depth) are imported, each too deep
// one starting a thread of its own with a too-deep warning, so that no
// message has as many ancestors as the bound forbids.
func TestLegacyThreadTooDeep(t *testing.T) {
	t.Parallel()
	eng := sqliteEngine(t)
	limit := eng.Limits().MaxThreadDepth
	var rows bytes.Buffer
	for i := range 2*limit + 1 {
		reply := ""
		if i > 0 {
			reply = fmt.Sprintf(`,"replyToMessageId":"m%d"`, i-1)
		}
		fmt.Fprintf(&rows, `{"messageId":"m%d","role":"user","content":"hi","sender":"human","createdAt":%d%s}`+"\n", i, 1700000000000+i, reply)
	}
	res := must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), eng, &rows, transfer.ImportOptions{ID: "deep"}))
	if n := res.WarningCounts[transfer.WarnTooDeep]; n != 2 {
		t.Fatalf("%d too-deep warnings, want 2: %v", n, res.Warnings)
	}
	for i := range 2*limit + 1 {
		m := must[*parley.Message](t)(storeOf(eng).GetMessage(ctxT(t), "deep", fmt.Sprintf("m%d", i)))
		if want := i % limit; m.Depth != want || (m.ReplyTo == "") != (want == 0) {
			t.Fatalf("m%d has depth %d, replyTo %q; want depth %d", i, m.Depth, m.ReplyTo, want)
		}
	}
}
