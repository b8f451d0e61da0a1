package transfer_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/transfer"
)

// TestRoundTrip exports a conversation with streaming parts, tool calls, an
// abort, a reset, a revert, a delegation, a claim and threads; imports it
// into an empty store; and exports it again: the two exports are the same
// but for the epoch, in every machine format and across backends.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	backends := map[string]func(testing.TB) *engine.Engine{"sqlite": sqliteEngine, "postgres": postgresEngine}
	for from, mkFrom := range backends {
		for to, mkTo := range backends {
			for _, f := range []transfer.Format{transfer.JSON, transfer.JSONL} {
				t.Run(from+"-to-"+to+"-"+string(f), func(t *testing.T) {
					t.Parallel()
					src := mkFrom(t)
					id := richConversation(t, src)
					first := export(t, src, id, f)
					for _, typ := range []string{"chunk", "part.updated", "message.updated", "messages.removed", "turn.claimed", "delegation", "turn.aborted", "turn.reset", "trace", "prompt.dispatched"} {
						if !bytes.Contains(first, []byte(`"type":"`+typ+`"`)) {
							t.Fatalf("the conversation has no %s event to carry", typ)
						}
					}
					dst := mkTo(t)
					res := must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), dst, bytes.NewReader(first), transfer.ImportOptions{}))
					if res.Source != "export" || len(res.Warnings) != 0 {
						t.Fatalf("import: source %q, warnings %v", res.Source, res.Warnings)
					}
					second := export(t, dst, id, f)
					if !bytes.Equal(withoutEpoch(first), withoutEpoch(second)) {
						t.Fatalf("the second export differs:\n%s\n---\n%s", first, second)
					}
					if bytes.Equal(first, second) {
						t.Fatal("the import kept the epoch; it must make a new one")
					}
					sameViews(t, src, dst, id)
				})
			}
		}
	}
}

// sameViews compares what readers see of both copies: head, a thread, the
// message still streaming (its row plus the chunks after it).
func sameViews(t *testing.T, a, b *engine.Engine, id string) {
	t.Helper()
	ctx := ctxT(t)
	va, vb := must[*engine.View](t)(a.Conversation(ctx, id)), must[*engine.View](t)(b.Conversation(ctx, id))
	va.Head.Epoch, vb.Head.Epoch, va.Conversation.Epoch, vb.Conversation.Epoch = "", "", "", ""
	if ja, jb := jsonOf(t, va), jsonOf(t, vb); ja != jb {
		t.Fatalf("views differ:\n%s\n%s", ja, jb)
	}
	for _, eng := range []*engine.Engine{a, b} {
		anc := must[[]*parley.Message](t)(storeOf(eng).Ancestors(ctx, store.ThreadParams{ConversationID: id, MessageID: "c1"}))
		if len(anc) != 3 || anc[0].ID != "q1" || anc[1].ID != "r1" || anc[2].ID != "b1" {
			t.Fatalf("ancestors of c1: %v", ids(anc))
		}
		replies := must[[]*parley.Message](t)(storeOf(eng).ListReplies(ctx, store.ListRepliesParams{ConversationID: id, MessageID: "q1", Limit: 10}))
		if got := ids(replies); got != "r1 a2" {
			t.Fatalf("replies to q1: %s", got)
		}
	}
	sa := must[*parley.Message](t)(readerOf(a).Message(ctx, id, "a4"))
	sb := must[*parley.Message](t)(readerOf(b).Message(ctx, id, "a4"))
	if sa.Status != parley.StatusStreaming || jsonOf(t, sa) != jsonOf(t, sb) {
		t.Fatalf("the streaming message differs:\n%s\n%s", jsonOf(t, sa), jsonOf(t, sb))
	}
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ids(ms []*parley.Message) string {
	var b bytes.Buffer
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.ID)
	}
	return b.String()
}

// TestImportedConversationGoesOn checks that an imported conversation is
// live: its streaming message can be finished and new messages follow.
func TestImportedConversationGoesOn(t *testing.T) {
	t.Parallel()
	src, dst := sqliteEngine(t), sqliteEngine(t)
	id := richConversation(t, src)
	must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), dst, bytes.NewReader(export(t, src, id, transfer.JSONL)), transfer.ImportOptions{ID: "copy"}))
	ctx := ctxT(t)
	for _, eng := range []*engine.Engine{src, dst} {
		cid := map[*engine.Engine]string{src: id, dst: "copy"}[eng]
		done := must[*engine.MessageResult](t)(eng.FinalizeMessage(ctx, cid, finalizeA4()))
		if done.Message.Status != parley.StatusComplete || done.Message.Content == "" {
			t.Fatalf("%s: finalized a4: %+v", cid, done.Message)
		}
	}
	a := must[*parley.Message](t)(storeOf(src).GetMessage(ctx, id, "a4"))
	b := must[*parley.Message](t)(storeOf(dst).GetMessage(ctx, "copy", "a4"))
	a.ConversationID, b.ConversationID = "", ""
	a.UpdatedAt, b.UpdatedAt = parley.Time{}, parley.Time{} // finalized a moment apart
	if jsonOf(t, a) != jsonOf(t, b) {
		t.Fatalf("after finishing, a4 differs:\n%s\n%s", jsonOf(t, a), jsonOf(t, b))
	}
}

// TestVersion1ExportStillImports imports a version-1 export kept in
// testdata (of richConversation) and exports it again, the same but for the
// epoch: files written by earlier builds stay importable.
func TestVersion1ExportStillImports(t *testing.T) {
	t.Parallel()
	file, err := os.ReadFile("testdata/rich.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	eng := sqliteEngine(t)
	must[*transfer.ImportResult](t)(transfer.Import(ctxT(t), eng, bytes.NewReader(file), transfer.ImportOptions{}))
	if again := export(t, eng, "rich", transfer.JSONL); !bytes.Equal(withoutEpoch(bytes.TrimSpace(file)), withoutEpoch(bytes.TrimSpace(again))) {
		t.Fatal("the re-export of testdata/rich.jsonl differs")
	}
}
