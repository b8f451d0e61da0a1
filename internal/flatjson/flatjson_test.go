package flatjson_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/parleyhq/parley/internal/flatjson"
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

// readStrings collects what Strings reads: each key's last value, and
// which of them were strings.
func readStrings(s string) (map[string]string, map[string]bool, bool) {
	vals, isStr := map[string]string{}, map[string]bool{}
	ok := flatjson.Strings(s, func(k, v string, str bool) bool { vals[k], isStr[k] = v, str; return true })
	return vals, isStr, ok
}

// TestStrings: string fields are read around values of every other kind,
// nested strings with quotes, brackets and escapes included, and what is
// not an object is refused.
func TestStrings(t *testing.T) {
	msg := `{"id":"m1","parts":[{"type":"text","text":"a \"quoted\" ] } [ { \\ word"},{"type":"tool-call","args":{"q":"x\\"}}],` +
		`"seq":42,"status":"complete","meta":null,"ok":true,"n":-1.5e3,"empty":{},"none":[],"next":"b\u00e9"}`
	vals, isStr, ok := readStrings(msg)
	if !ok {
		t.Fatalf("Strings refused %s", msg)
	}
	want := map[string]string{"id": "m1", "parts": "", "seq": "", "status": "complete", "meta": "", "ok": "", "n": "", "empty": "", "none": "", "next": "bé"}
	if !maps.Equal(vals, want) {
		t.Fatalf("Strings read %v; want %v", vals, want)
	}
	if !isStr["id"] || !isStr["next"] || isStr["parts"] || isStr["seq"] || isStr["meta"] {
		t.Fatalf("which values are strings: %v", isStr)
	}
	for _, bad := range []string{``, `[]`, `"s"`, `{"a":"b"`, `{"a":[1,2}`, `{"a":[1,2]`, `{"a":"b",}`, `{"a" "b"}`, `{"a":"b"}x`, `{"a":}`, `{"a":"\q"}`} {
		if _, _, ok := readStrings(bad); ok {
			t.Errorf("Strings(%q) was read", bad)
		}
	}
	stop := flatjson.Strings(`{"a":"1","b":"2"}`, func(k, _ string, _ bool) bool { return k != "a" })
	if stop {
		t.Error("Strings went on after field returned false")
	}
}

// TestStringsOf checks that StringsOf reads bytes as Strings reads the same
// string, and that it reads them in place: a value without escapes is bytes
// of the slice it was given.
func TestStringsOf(t *testing.T) {
	b := []byte(`{"id":"m1","parts":[{"type":"text","text":"x"}],"next":"b\u00e9","status":"complete"}`)
	var got []string
	inPlace := false
	ok := flatjson.StringsOf(b, func(k, v string, isString bool) bool {
		got = append(got, strings.Clone(k)+"="+strings.Clone(v))
		if k == "id" {
			inPlace = unsafe.StringData(v) == &b[7]
		}
		return true
	})
	want := []string{"id=m1", "parts=", "next=bé", "status=complete"}
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("StringsOf read %v (%v); want %v", got, ok, want)
	}
	if !inPlace {
		t.Error("StringsOf copied the bytes it was given")
	}
}

// FuzzStrings checks Strings against encoding/json on valid objects: each
// key's value is a string exactly when encoding/json reads one, and the
// same string (the last, for a key given twice). Like Each, it may refuse
// invalid UTF-8, which encoding/json replaces.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{`{}`, `{"id":"m","parts":[{"t":"a\"]}"}],"n":1}`, `{"a":{"b":["c",{"d":"\\"}]},"e":"f"}`, `{"a":"b","a":"c"}`, `{"a":null,"b":true}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &raw); err != nil || raw == nil {
			return // Strings is for valid objects only
		}
		vals, isStr, ok := readStrings(s)
		if !ok && !utf8.ValidString(s) {
			return // refused, as Each refuses it: encoding/json would replace the bytes
		}
		if !ok {
			t.Fatalf("Strings refused %q, which encoding/json reads", s)
		}
		if len(vals) != len(raw) {
			t.Fatalf("Strings(%q) read keys %v; encoding/json %d keys", s, vals, len(raw))
		}
		for k, r := range raw {
			var want string
			wantStr := json.Unmarshal(r, &want) == nil && len(r) > 0 && r[0] == '"'
			if isStr[k] != wantStr || (wantStr && vals[k] != want) {
				t.Fatalf("Strings(%q)[%q] = %q (string %v); encoding/json %s", s, k, vals[k], isStr[k], r)
			}
		}
	})
}
