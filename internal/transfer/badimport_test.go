package transfer_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/transfer"
)

// TestBadImports feeds broken files: each gets its error code, says where,
// and leaves nothing behind (not even part of a conversation).
func TestBadImports(t *testing.T) {
	t.Parallel()
	src := sqliteEngine(t)
	good := export(t, src, richConversation(t, src), transfer.JSONL)
	lines := bytes.Split(bytes.TrimSpace(good), []byte("\n"))
	edit := func(f func(ls [][]byte) [][]byte) []byte {
		ls := f(append([][]byte(nil), lines...))
		return bytes.Join(ls, []byte("\n"))
	}
	replace := func(i int, old, new string) []byte {
		return edit(func(ls [][]byte) [][]byte {
			ls[i] = bytes.Replace(ls[i], []byte(old), []byte(new), 1)
			return ls
		})
	}
	msgLine := func(id string) int {
		for i, l := range lines {
			if bytes.HasPrefix(l, []byte(`{"message":{"id":"`+id+`"`)) {
				return i
			}
		}
		t.Fatalf("no row for %s", id)
		return 0
	}
	legacy, err := os.ReadFile("testdata/legacy.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rows := jsonArray(legacy) // [row,row,…]
	runBadImports(t, []badImport{
		{"empty", parley.EINVALID, "empty", []byte("  \n")},
		{"truncated header", parley.EINVALID, "header", []byte(`{"parley":"export","version":1,"conver`)},
		{"a later version", parley.EINVALIDVALUE, "version 2", replace(0, `"version":1`, `"version":2`)},
		{"a gap in seq", parley.EINVALID, "seq 201", edit(func(ls [][]byte) [][]byte { return append(ls[:200], ls[201:]...) })},
		{"an unknown event type", parley.EINVALIDVALUE, `"nonsense"`, replace(150, `"type":"chunk"`, `"type":"nonsense"`)},
		{"the tail cut off", parley.EINVALID, "lastSeq", edit(func(ls [][]byte) [][]byte { return ls[:240] })},
		{"an unknown part kind", parley.EINVALIDVALUE, "unknown part type", replace(msgLine("c1"), `"type":"text"`, `"type":"hologram"`)},
		{"a reply to no message", parley.EINVALID, "not an earlier message", replace(msgLine("c1"), `"replyTo":"b1"`, `"replyTo":"zz"`)},
		{"a wrong depth", parley.EINVALID, "depth", replace(msgLine("c1"), `"depth":3`, `"depth":7`)},
		{"a self reply", parley.EINVALID, "itself", replace(msgLine("c1"), `"replyTo":"b1"`, `"replyTo":"c1"`)},
		{"rows out of order", parley.EINVALID, "not after", edit(func(ls [][]byte) [][]byte {
			i, j := msgLine("c2"), msgLine("c3")
			ls[i], ls[j] = ls[j], ls[i]
			return ls
		})},
		{"a bad id", parley.EINVALIDVALUE, "is not 1-128", replace(msgLine("c1"), `"id":"c1"`, `"id":"c 1"`)},
		{"a dot-dot id", parley.EINVALIDVALUE, "is not 1-128", replace(msgLine("c1"), `"id":"c1"`, `"id":".."`)},
		{"a wrong type", parley.EINVALID, "row 10", replace(9, `"seq":9`, `"seq":"nine"`)},
		{"a line with two things", parley.EINVALID, "one", replace(5, `{"event":{`, `{"message":{},"event":{`)},
		{"garbage legacy rows", parley.EINVALID, "row 1", []byte(`[1, 2, 3]`)},
		{"legacy rows cut after a comma", parley.EINVALID, "closing ]", []byte(`[{"role":"user","content":"hi"},`)},
		{"neither an export nor rows", parley.EINVALIDVALUE, "row 1: not a message row", []byte(`{"garbage":1}`)},
		{"an array of no rows", parley.EINVALIDVALUE, "row 1: not a message row", []byte(`[{"garbage":1}]`)},
		{"an empty object", parley.EINVALIDVALUE, "row 1: not a message row", []byte(`{}`)},
		{"an export with its keys sorted", parley.EINVALIDVALUE, `first key is not "parley"`, []byte(`{"conversation":{},"events":[],"parley":"export","version":1}`)},
		{"rows, then no row", parley.EINVALIDVALUE, "row 2: not a message row", []byte(`{"role":"user","content":"hi"}` + "\n" + `{"garbage":1}`)},
		{"legacy rows cut after a row", parley.EINVALID, "closing ]", rows[:bytes.LastIndexByte(rows, ']')]},
		{"legacy rows cut inside a row", parley.EINVALID, "unexpected EOF", rows[:len(rows)/2]},
		{"something after the legacy rows", parley.EINVALID, "follows", append(bytes.Clone(rows), ` {}`...)},
		{"a message over the size limit", parley.ETOOLARGE, `message "c1"`, replace(msgLine("c1"), `"text":"Agreed."`, `"text":"Agreed.`+strings.Repeat("x", 1<<20)+`"`)},
		{"a value over the limit", parley.ETOOLARGE, "bytes", append(append([]byte(`{"content":"`), bytes.Repeat([]byte("x"), transfer.MaxValueBytes+1<<20)...), `"}`...)},
	})
}

// badImport is a file an import refuses, with the error it must get.
type badImport struct {
	name, code, where string
	input             []byte
}

// runBadImports imports each file into a new engine: each must get its
// error code, saying where, and leave nothing behind.
func runBadImports(t *testing.T, cases []badImport) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := sqliteEngine(t)
			_, err := transfer.Import(ctxT(t), eng, bytes.NewReader(tc.input), transfer.ImportOptions{})
			if parley.ErrorCode(err) != tc.code || !strings.Contains(parley.ErrorMessage(err), tc.where) {
				t.Fatalf("err = %v, want %s saying %q", err, tc.code, tc.where)
			}
			left := must[[]*engine.View](t)(listAll(eng))
			if len(left) != 0 {
				t.Fatalf("a failed import left %d conversations", len(left))
			}
		})
	}
}

func listAll(eng *engine.Engine) ([]*engine.View, error) {
	vs, _, err := eng.ListConversations(ctxTBackground(), store.ListConversationsParams{Limit: 100})
	return vs, err
}

// TestImportIntoATakenID refuses to import over an existing conversation
// and leaves that conversation as it was.
func TestImportIntoATakenID(t *testing.T) {
	t.Parallel()
	eng := sqliteEngine(t)
	id := richConversation(t, eng)
	before := export(t, eng, id, transfer.JSONL)
	_, err := transfer.Import(ctxT(t), eng, bytes.NewReader(before), transfer.ImportOptions{})
	if parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("err = %v, want EBUSY", err)
	}
	if after := export(t, eng, id, transfer.JSONL); !bytes.Equal(before, after) {
		t.Fatal("a refused import changed the conversation")
	}
}
