package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley"
)

// fuzzDecoder checks that a body decoder never panics and either refuses
// the input with a client error (400 or 413) or returns a value that
// encodes again and whose encoding decodes again.
func fuzzDecoder[T any](f *testing.F, seeds ...string) {
	for _, s := range append(seeds, ``, `null`, ` {}`, `{}{}`, `{"a":`, `"x"`, "\xff") {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecode[T])
}

// checkDecode decodes data as a T and checks what fuzzDecoder promises.
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

func FuzzDecodeMessage(f *testing.F) {
	fuzzDecoder[messageRequest](f, `{"content":"hi","finality":"turn","precondition":{"expectTurn":1,"startingTurn":true}}`,
		`{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"running","args":{"q":1}}],"replyTo":"m1"}`, `{"content":`, `[]`, `{"x":1}`)
}

func FuzzDecodeTrace(f *testing.F) {
	fuzzDecoder[eventRequest](f, `{"type":"trace","payload":{"a":[1,2]}}`, `{"type":"trace","finality":"turn"}`)
}

func FuzzDecodeConversation(f *testing.F) {
	fuzzDecoder[createConversationRequest](f, `{"title":"t","participants":["a","b"],"turnPolicy":"free","metadata":{"k":"v"}}`)
}

func FuzzDecodeTurn(f *testing.F) {
	fuzzDecoder[claimRequest](f, `{"expectTurn":3,"ttlMs":1000}`, `{"expectTurn":"3"}`)
}

func FuzzDecodeReset(f *testing.F) {
	fuzzDecoder[resetRequest](f, `{"claim":true,"ttlMs":5}`)
}

func FuzzDecodeAbort(f *testing.F) {
	fuzzDecoder[abortRequest](f, `{"reason":"stuck"}`)
}

func FuzzDecodeDelegate(f *testing.F) {
	fuzzDecoder[delegateRequest](f, `{"to":"worker"}`)
}

func FuzzDecodeToken(f *testing.F) {
	fuzzDecoder[tokenRequest](f, `{"kind":"agent","agentId":"a"}`)
}
