package flatjson_test

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/parleyhq/parley/flatjson"
)

// read collects what Each reads.
func read(s string) (map[string]string, bool) {
	got := map[string]string{}
	ok := flatjson.Each(s, func(k, v string) bool { got[k] = v; return true })
	return got, ok
}

func TestEach(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string // nil: Each must report false
	}{
		{`{}`, map[string]string{}},
		{` { } `, map[string]string{}},
		{`{"type":"text","turnId":"m1","delta":"Hello"}`, map[string]string{"type": "text", "turnId": "m1", "delta": "Hello"}},
		{"{ \"a\" :\t\"b\" ,\n\"c\":\"\" }\r\n", map[string]string{"a": "b", "c": ""}},
		{`{"d":"line\nnext \"quoted\" \\ \/ \t\b\f\r"}`, map[string]string{"d": "line\nnext \"quoted\" \\ / \t\b\f\r"}},
		{`{"d":"\u00e9\u4e16 \ud83d\ude00"}`, map[string]string{"d": "é世 😀"}},
		{`{"d":"\ud83d"}`, map[string]string{"d": "\uFFFD"}},
		{`{"d":"\ud83dA\u0041"}`, map[string]string{"d": "\uFFFDAA"}},
		{`{"d":"\ud83d\u0041"}`, map[string]string{"d": "\uFFFDA"}},
		{`{"k\u0065y":"v"}`, map[string]string{"key": "v"}},
		{`{"d":"héllo 世界"}`, map[string]string{"d": "héllo 世界"}},
		// Left to encoding/json:
		{`{"n":1}`, nil},
		{`{"a":null}`, nil},
		{`{"a":["x"]}`, nil},
		{`{"a":{"b":"c"}}`, nil},
		{`{"a":"b","a":"c"}`, nil},
		{`{"a":"b",}`, nil},
		{`{"a":"b"} x`, nil},
		{`{"a":"b"}{}`, nil},
		{`{"a":"b"`, nil},
		{`{"a":"b`, nil},
		{`{"a":"\x"}`, nil},
		{`{"a":"\u12"}`, nil},
		{"{\"a\":\"tab\there\"}", nil},
		{"{\"a\":\"\xff\"}", nil},
		{`["a"]`, nil},
		{``, nil},
		{`{a:"b"}`, nil},
	} {
		got, ok := read(tc.in)
		if ok != (tc.want != nil) || (ok && !maps.Equal(got, tc.want)) {
			t.Errorf("Each(%q) = %v, %v; want %v", tc.in, got, ok, tc.want)
		}
	}
}

// FuzzEach checks Each against encoding/json: whatever Each reads is a
// JSON object of strings, and encoding/json reads the same from it.
func FuzzEach(f *testing.F) {
	for _, s := range []string{`{}`, `{"type":"text","delta":"a\nb"}`, `{"d":"\ud83d\ude00"}`, `{"a":"b","c":"d"}`, `{"a":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := read(s)
		if !ok {
			return
		}
		var want map[string]string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("Each read %q, which encoding/json refuses: %v", s, err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("Each(%q) = %v, encoding/json %v", s, got, want)
		}
	})
}
