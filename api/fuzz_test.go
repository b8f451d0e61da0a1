package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley"
)

// bodyDecoders are the checks of every request body the API decodes, one
// per body type; FuzzDecodeBody picks one with the input's first byte.
var bodyDecoders = []struct {
	name  string
	check func(*testing.T, []byte)
	seeds []string
}{
	{"message", checkDecode[messageRequest], []string{
		`{"content":"hi","finality":"turn","precondition":{"expectTurn":1,"startingTurn":true}}`,
		`{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"running","args":{"q":1}}],"replyTo":"m1"}`,
		`{"content":`, `[]`, `{"x":1}`}},
	{"trace", checkDecode[eventRequest], []string{`{"type":"trace","payload":{"a":[1,2]}}`, `{"type":"trace","finality":"turn"}`}},
	{"conversation", checkDecode[createConversationRequest], []string{`{"title":"t","participants":["a","b"],"turnPolicy":"free","metadata":{"k":"v"}}`}},
	{"claim", checkDecode[claimRequest], []string{`{"expectTurn":3,"ttlMs":1000}`, `{"expectTurn":"3"}`}},
	{"reset", checkDecode[resetRequest], []string{`{"claim":true,"ttlMs":5}`}},
	{"abort", checkDecode[abortRequest], []string{`{"reason":"stuck"}`}},
	{"delegate", checkDecode[delegateRequest], []string{`{"to":"worker"}`}},
	{"token", checkDecode[tokenRequest], []string{`{"kind":"agent","agentId":"a"}`}},
	{"prompt", checkDecode[promptRequest], []string{`{"content":"later","mode":"collect","to":"bot","channel":{"type":"slack","id":"c1"}}`, `{"mode":1}`}},
	{"prompt ref", checkDecode[promptRef], []string{`{"agentId":"alice"}`}},
	{"revert", checkDecode[revertRequest], []string{`{"messageId":"m1"}`, `{"messageId":["m1"]}`}},
	{"task", checkDecode[taskRequest], []string{`{"conversationId":"c","prompt":"daily","cron":"0 9 * * *"}`, `{"everyMs":"1000"}`}},
}

// FuzzDecodeBody feeds every request body decoder arbitrary bytes: the
// first byte picks the decoder, the rest is the body. A decoder must never
// panic; it refuses the input as a client error (400 or 413) or returns a
// value that encodes again and whose encoding decodes again.
func FuzzDecodeBody(f *testing.F) {
	for i, d := range bodyDecoders {
		for _, s := range append(d.seeds, ``, `null`, ` {}`, `{}{}`, `{"a":`, `"x"`, "\xff") {
			f.Add(append([]byte{byte(i)}, s...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		bodyDecoders[int(data[0])%len(bodyDecoders)].check(t, data[1:])
	})
}

// checkDecode decodes data as a T and checks what FuzzDecodeBody promises.
func checkDecode[T any](t *testing.T, data []byte) {
	var v T
	err := decodeJSON(bytes.NewReader(data), 1<<20, &v)
	if err != nil {
		switch parley.ErrorCode(err) {
		case parley.EINVALID, parley.ETOOLARGE:
			return
		}
		t.Fatalf("decode error with code %q: %v", parley.ErrorCode(err), err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("decoded value does not encode: %v", err)
	}
	var again T
	if err := decodeJSON(bytes.NewReader(b), 1<<20, &again); err != nil {
		t.Fatalf("re-encoded value %s does not decode: %v", b, err)
	}
	_ = requestHash(&again)
}
