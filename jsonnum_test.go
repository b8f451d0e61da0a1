package parley_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

func TestHasOversizedNumber(t *testing.T) {
	long := strings.Repeat("9", parley.MaxNumberDigits)
	for _, c := range []struct {
		json string
		want bool
	}{
		{`{"n":1e200000}`, true},
		{`{"n":-1E+1001}`, true},
		{`{"n":1e-1001}`, true},
		{`[0.` + long + `1]`, true},
		{`[` + long + `0]`, true},
		{`{"n":1e1000,"m":-1e-1000,"k":` + long + `}`, false},
		{`{"n":1.5e308,"s":"1e200000"}`, false},                 // in a string: text
		{`{"s":"a \"quoted\" 1e9999 \\","n":2}`, false},         // escapes inside the string
		{`{"s":"ends with a backslash \\\\","n":1e5000}`, true}, // the string ends before the number
		{`{"e1e99999":true}`, false},                            // a key
		{``, false},
	} {
		if got := parley.HasOversizedNumber([]byte(c.json)); got != c.want {
			t.Errorf("HasOversizedNumber(%.60s) = %v, want %v", c.json, got, c.want)
		}
	}
}
