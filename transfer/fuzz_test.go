package transfer_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/transfer"
)

// FuzzImport feeds the importer arbitrary files, seeded with a real export
// and legacy rows: it must never panic, a refused file must leave nothing
// behind, and an accepted one must export again.
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
	eng := sqliteEngine(f)
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
		for _, format := range []transfer.Format{transfer.JSONL, transfer.Markdown} {
			var out bytes.Buffer
			if _, err := transfer.Export(ctxT(t), eng, id, format, &out); err != nil {
				t.Fatalf("export of an accepted import: %v", err)
			}
		}
	})
}
