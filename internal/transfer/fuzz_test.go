package transfer_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/transfer"
)

// FuzzImport feeds the importer arbitrary files, seeded with a real export,
// legacy rows and files over the bounds of a live write: it must never
// panic, a refused file must leave nothing behind, and an accepted one must
// hold those bounds (turns that grow one at a time, a queue within its
// limit) and export again.
func FuzzImport(f *testing.F) {
	legacy, err := os.ReadFile("testdata/legacy.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(legacy)
	f.Add(jsonArray(legacy))
	f.Add([]byte(`{"parley":"export","version":1,"conversation":{"id":"c","createdAt":"2026-11-22T12:00:00.000Z"},"lastSeq":1}` + "\n" +
		`{"event":{"conversationId":"c","seq":1,"type":"conversation.created","turn":0,"finality":"none","ts":"2026-11-22T12:00:00.000Z","data":{}}}`))
	rich, err := os.ReadFile("testdata/rich.jsonl") // an export of richConversation
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rich)
	queued := ev("prompt.queued", 0, "alice", "none", `{"id":"p{seq}","content":"hi","mode":"followup","until":null}`)
	f.Add(boundsFile("", []string{ev("message", math.MaxInt, "a", "none", msg("m1", math.MaxInt, "complete", ""))}))
	f.Add(boundsFile("", repeat(257, queued)))
	f.Add(boundsFile("", []string{ev("message", 1, "a", "none", msg("m0", 1, "complete", "")), ev("trace", 1, "a", "none", `{"id":"t1","payload":"`+strings.Repeat("x", 17<<10)+`"}`)}))
	eng := sqliteEngine(f)
	limits := eng.Limits()
	n := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		n++
		id := fmt.Sprintf("fuzz-%d", n)
		res, ierr := transfer.Import(ctxT(t), eng, bytes.NewReader(data), transfer.ImportOptions{ID: id})
		if err := ierr; err != nil {
			if code := parley.ErrorCode(err); code == parley.EINTERNAL {
				t.Fatalf("internal error: %v", err)
			}
			if _, err := eng.Conversation(ctxT(t), id); parley.ErrorCode(err) != parley.ENOTFOUND {
				t.Fatalf("a refused import (%v) left conversation %s behind (%v)", ierr, id, err)
			}
			return
		}
		if res.Conversation.ID != id {
			t.Fatalf("imported as %s, asked for %s", res.Conversation.ID, id)
		}
		v := must[*engine.View](t)(eng.Conversation(ctxT(t), id))
		if h := v.Head; h.LastTurn < 0 || int64(h.LastTurn) >= h.LastSeq {
			t.Fatalf("an accepted import is at turn %d after %d events", h.LastTurn, h.LastSeq)
		}
		queued := 0
		for _, p := range must[[]conv.QueuedPrompt](t)(eng.Prompts(ctxT(t), id)) {
			queued += len(p.Parts)
		}
		if queued > limits.MaxQueuedPrompts {
			t.Fatalf("an accepted import queues %d prompts; the limit is %d", queued, limits.MaxQueuedPrompts)
		}
		for _, format := range []transfer.Format{transfer.JSONL, transfer.Markdown} {
			var out bytes.Buffer
			if _, err := transfer.Export(ctxT(t), readerOf(eng), id, format, &out); err != nil {
				t.Fatalf("export of an accepted import: %v", err)
			}
		}
	})
}
