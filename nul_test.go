package parley_test

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley"
)

func TestHasNUL(t *testing.T) {
	for _, c := range []struct {
		json string
		want bool
	}{
		{`"plain"`, false},
		{`"a\u0000b"`, true},
		{`{"k":"\u0000"}`, true},
		{`"\\u0000"`, false},   // a backslash, then the text u0000
		{`"\\\u0000"`, true},   // a backslash, then NUL
		{`"\\\\u0000"`, false}, // two backslashes, then u0000
		{`"\u00000"`, true},
		{`"\u0001\u00001"`, true},
		{`"\u0010"`, false},
		{"\"raw\x00\"", true},
		{``, false},
	} {
		if got := parley.HasNUL([]byte(c.json)); got != c.want {
			t.Errorf("HasNUL(%s) = %v, want %v", c.json, got, c.want)
		}
	}
}

// FuzzHasNUL: HasNUL says exactly whether the string JSON encodes holds
// U+0000.
func FuzzHasNUL(f *testing.F) {
	for _, s := range []string{"", "a\x00b", `\u0000`, `\\u0000`, "\\\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		data, _ := json.Marshal(s)
		want := false
		for i := 0; i < len(s); i++ {
			want = want || s[i] == 0
		}
		if got := parley.HasNUL(data); got != want {
			t.Fatalf("HasNUL(%s) = %v, want %v", data, got, want)
		}
	})
}
