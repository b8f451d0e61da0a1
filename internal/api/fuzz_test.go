package api

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

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
		`{"precondition":{"expectTurn":99999999999999999999}}`,
		`{"parts":[{"type":"tool-call","callId":"c","toolName":"t","status":"running","args":{"q":1}}],"replyTo":"m1"}`,
		`{"content":`, `[]`, `{"x":1}`}},
	{"trace", checkDecode[eventRequest], []string{`{"type":"trace","payload":{"a":[1,2]}}`, `{"type":"trace","finality":"turn"}`}},
	{"conversation", checkDecode[parley.CreateConversationRequest], []string{`{"title":"t","participants":["a","b"],"turnPolicy":"free","metadata":{"k":"v"}}`}},
	{"claim", checkDecode[parley.ClaimTurnRequest], []string{`{"expectTurn":3,"ttlMs":1000}`, `{"expectTurn":"3"}`,
		`{"ttlMs":99999999999999999999}`, `{"ttlMs":-9223372036854775809}`, `{"expectTurn":1e40}`, `{"ttlMs":1.5}`}},
	{"reset", checkDecode[parley.ResetTurnRequest], []string{`{"claim":true,"ttlMs":5}`, `{"ttlMs":18446744073710}`}},
	{"abort", checkDecode[parley.AbortTurnRequest], []string{`{"reason":"stuck"}`}},
	{"delegate", checkDecode[parley.DelegateRequest], []string{`{"to":"worker"}`}},
	{"token", checkDecode[parley.CreateTokenRequest], []string{`{"kind":"agent","agentId":"a"}`}},
	{"prompt", checkDecode[promptRequest], []string{`{"content":"later","mode":"collect","to":"bot","channel":{"type":"slack","id":"c1"}}`, `{"mode":1}`}},
	{"prompt ref", checkDecode[parley.PromptActionRequest], []string{`{"agentId":"alice"}`}},
	{"revert", checkDecode[parley.RevertRequest], []string{`{"messageId":"m1"}`, `{"messageId":["m1"]}`}},
	{"task", checkDecode[parley.CreateTaskRequest], []string{`{"conversationId":"c","prompt":"daily","cron":"0 9 * * *"}`, `{"everyMs":"1000"}`,
		`{"everyMs":9223372036854775808}`, `{"everyMs":-0}`, `{"everyMs":1e3}`}},
}

// FuzzDecodeBody feeds every request body decoder arbitrary bytes: the
// first byte picks the decoder, the rest is the body. A decoder must never
// panic; it refuses the input as a client error (400 or 413, or 422 for a
// whole number too large for its field, which the input must hold) or
// returns a value that encodes again and whose encoding decodes again.
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
		case parley.EINVALIDVALUE:
			// "field N is out of range": N is a whole number of the input
			// that does not fit in 64 bits.
			f := strings.Fields(parley.ErrorMessage(err))
			if len(f) > 1 && strings.Contains(parley.ErrorMessage(err), "is out of range") && bytes.Contains(data, []byte(f[1])) {
				if _, perr := strconv.ParseInt(f[1], 10, 64); perr != nil && wholeNumber(strings.TrimPrefix(f[1], "-")) {
					return
				}
			}
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
	_ = parley.RequestHash(&again)
}

// FuzzClaimTTL feeds a claim's and a reset's ttlMs, as JSON text, through
// the body decoder and the range check, with longest claims from a
// millisecond to a year. A ttlMs accepted is a whole number from 0 (the
// default) to the longest claim, in milliseconds, and becomes exactly that
// many milliseconds; any other number is refused before anything is
// decided: invalid_value naming ttlMs (the handlers return it before the
// engine sees the command), or invalid_request for text that is not a
// whole number.
func FuzzClaimTTL(f *testing.F) {
	for _, s := range []string{"0", "1", "600000", "600001", "-1", "18446744073710", "9223372036854775807", "-9223372036854775808",
		"99999999999999999999", "1.5", "1e3", "-0", `"5"`, "null"} {
		f.Add(s, int64(10*time.Minute/time.Millisecond))
	}
	f.Add("86400000", int64(1))
	f.Fuzz(func(t *testing.T, text string, longestMs int64) {
		longest := time.Duration(uint64(longestMs-1)%uint64(366*24*time.Hour/time.Millisecond)+1) * time.Millisecond // 1 ms to a year
		var claim parley.ClaimTurnRequest
		var reset parley.ResetTurnRequest
		for _, c := range []struct {
			body string
			into any
			ms   *int64
		}{{`{"ttlMs":` + text + `}`, &claim, &claim.TTLMs}, {`{"claim":true,"ttlMs":` + text + `}`, &reset, &reset.TTLMs}} {
			if err := decodeJSON(strings.NewReader(c.body), 1<<20, c.into); err != nil {
				if code := parley.ErrorCode(err); code != parley.EINVALID && code != parley.EINVALIDVALUE {
					t.Fatalf("%s: refused with %v", c.body, err)
				}
				continue
			}
			ms := *c.ms
			if n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64); err == nil && n != ms {
				t.Fatalf("%s decoded to ttlMs %d", c.body, ms)
			}
			d, err := claimTTL(ms, longest)
			if ms >= 0 && ms <= longest.Milliseconds() {
				if err != nil || d != time.Duration(ms)*time.Millisecond || d > longest {
					t.Fatalf("ttlMs %d with claims up to %s: %v, %v", ms, longest, d, err)
				}
			} else if parley.ErrorCode(err) != parley.EINVALIDVALUE || !strings.Contains(parley.ErrorMessage(err), "ttlMs") {
				t.Fatalf("ttlMs %d with claims up to %s: %v, %v; want invalid_value", ms, longest, d, err)
			}
		}
	})
}

// FuzzQueryInt feeds the query number reader arbitrary values. It may not
// panic; a number it accepts is the decimal form of the number read.
func FuzzQueryInt(f *testing.F) {
	for _, s := range []string{"117", "0", "-1", "05", "+5", "99999999999999999999", "1001", "-0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, after string) {
		n, err := queryInt(url.Values{"n": {after}}, "n", 7, -5, 1000)
		switch code := parley.ErrorCode(err); {
		case err == nil:
			if strconv.FormatInt(n, 10) != after && after != "-0" || n < -5 || n > 1000 {
				t.Fatalf("query number %q read as %d", after, n)
			}
		case code == parley.EINVALIDVALUE:
			if !wholeNumber(strings.TrimPrefix(after, "-")) {
				t.Fatalf("query number %q: %v, but it is malformed", after, err)
			}
		case code != parley.EINVALID:
			t.Fatalf("query number %q refused with %v", after, err)
		}
	})
}
