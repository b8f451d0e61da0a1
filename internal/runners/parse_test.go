package runners_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/internal/runners"
)

// strictly decodes data as the API does: one object, no unknown fields.
func strictly(data []byte) (runners.Frame, error) {
	var f runners.Frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&f)
	return f, err
}

func TestParseFrame(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"type":"text","turnId":"m1","delta":"Hello\nworld"}`, true},
		{`{"type":"message.create","turnId":"m1","replyTo":"p1","channelType":"slack","channelId":"C1"}`, true},
		{`{"type":"message.finalize","turnId":"m1","reason":"end_turn","finality":"turn","finalText":"x"}`, true},
		{`{"type":"text","conversationId":"c","turnId":"m1","delta":""}`, true},
		{`{"type":"tool","turnId":"m1","callId":"c1","args":{"q":1}}`, false}, // args: encoding/json
		{`{"type":"revert","messageIds":["a"]}`, false},
		{`{"type":"text","turnID":"m1"}`, false}, // another case: encoding/json
		{`{"type":"text","bogus":"x"}`, false},
	} {
		f, ok := runners.ParseFrame([]byte(tc.in))
		if ok != tc.ok {
			t.Errorf("ParseFrame(%s) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if want, err := strictly([]byte(tc.in)); ok && (err != nil || !reflect.DeepEqual(f, want)) {
			t.Errorf("ParseFrame(%s) = %+v; encoding/json %+v, %v", tc.in, f, want, err)
		}
	}
}

// FuzzParseFrame: a frame ParseFrame reads is one encoding/json reads, as
// strictly as the API does, to the same Frame.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"text","turnId":"m1","delta":"Hello"}`,
		`{"type":"message.create","turnId":"m1","replyTo":"p1"}`,
		`{"type":"tool","turnId":"m1","callId":"c1","status":"running","args":{}}`,
		`{"type":"message.finalize","turnId":"m1","finality":"turn","finalText":"\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := runners.ParseFrame(data)
		if !ok {
			return
		}
		want, err := strictly(data)
		if err != nil {
			t.Fatalf("ParseFrame read %q, which encoding/json refuses: %v", data, err)
		}
		if rest := bytes.TrimSpace(data); !reflect.DeepEqual(got, want) || rest[0] != '{' {
			t.Fatalf("ParseFrame(%q) = %+v, encoding/json %+v", data, got, want)
		}
	})
}
