package api_test

// The bad-input suite's bounds: numbers out of range or malformed, and
// schedules the scheduler refuses. Same fixture and checks as
// badinput_test.go: each case's status, code and message, and nothing
// written.

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBadNumbers: every number a client sends is read as written, never
// wrapped or clamped: one that is not a whole number written in digits (a
// fraction, an exponent, a plus sign, leading zeros, hexadecimal, a
// parameter given twice) is 400 invalid_request; a whole number outside its
// documented range, even one too large for 64 bits, is 422 invalid_value.
// Nothing is written. (Resume positions are in TestBadResumePositions.)
func TestBadNumbers(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	const huge = "99999999999999999999" // does not fit in 64 bits
	var cases []badCase
	query := func(path string, bad, outOfRange []string) {
		for _, v := range bad {
			cases = append(cases, badCase{"malformed " + path + v, "GET", path + v, "viewer", "", nil, 400, "invalid_request", ""})
		}
		for _, v := range outOfRange {
			cases = append(cases, badCase{"out of range " + path + v, "GET", path + v, "viewer", "", nil, 422, "invalid_value", "from"})
		}
	}
	malformed := []string{"x", "1.5", "1e3", "+5", "05", "0x10", "", "5%20", "%205", "1&{p}=2"}
	for _, p := range []string{"/v1/conversations?", "/v1/conversations/{c}/messages?", "/v1/conversations/{c}/events?", "/v1/conversations/{c}/messages/q1/replies?"} {
		var bad []string
		for _, v := range malformed {
			bad = append(bad, "limit="+strings.ReplaceAll(v, "{p}", "limit"))
		}
		query(p, bad, []string{"limit=0", "limit=1001", "limit=-1", "limit=" + huge, "limit=-" + huge})
		if p == "/v1/conversations?" {
			continue // pages by cursor
		}
		bad = bad[:0]
		for _, v := range malformed {
			bad = append(bad, "after="+strings.ReplaceAll(v, "{p}", "after"))
		}
		query(p, bad, []string{"after=-1", "after=" + huge, "after=-" + huge})
	}
	body := func(name, path, body string, status int, code, says string) {
		cases = append(cases, badCase{name, "POST", path, "alice", body, nil, status, code, says})
	}
	claim, reset := "/v1/conversations/{c3}/turns/claim", "/v1/conversations/{c3}/turns/reset"
	for p, pre := range map[string]string{claim: `{"ttlMs":`, reset: `{"claim":true,"ttlMs":`} {
		// 18446744073710 ms is 2^64 ns and a little: as a Duration it wrapped
		// to 0.45 ms; MaxInt64 wrapped to a negative, then the default.
		for _, v := range []string{"-1", "600001", "18446744073710", "9223372036854775807", "-9223372036854775808", huge} {
			body("ttlMs "+v, p, pre+v+`}`, 422, "invalid_value", "ttlMs")
		}
		for _, v := range []string{"1.5", "1e3", "-0.5", `"1000"`} {
			body("ttlMs "+v, p, pre+v+`}`, 400, "invalid_request", "ttlMs")
		}
	}
	for _, v := range []string{"-1", huge, "-" + huge} {
		body("expectTurn "+v, claim, `{"expectTurn":`+v+`}`, 422, "invalid_value", "expectTurn")
	}
	body("expectTurn 1.5", claim, `{"expectTurn":1.5}`, 400, "invalid_request", "expectTurn")
	m := "/v1/conversations/{c3}/messages"
	for _, v := range []string{"-1", "0", huge} {
		body("precondition.expectTurn "+v, m, `{"content":"x","precondition":{"expectTurn":`+v+`,"startingTurn":true}}`, 422, "invalid_value", "expectTurn")
	}
	body("precondition.expectTurn 1.0", m, `{"content":"x","precondition":{"expectTurn":1.0,"startingTurn":true}}`, 400, "invalid_request", "expectTurn")
	task := func(every string) string {
		return `{"conversationId":"{c}","prompt":"x","everyMs":` + every + `}`
	}
	// MaxInt64 ms fired every second (its Duration wrapped to a negative).
	for _, v := range []string{"-1", "-1000", "999", "31622400001", "18446744073710", "9223372036854775807", huge, "-" + huge} {
		body("everyMs "+v, "/v1/tasks", task(v), 422, "invalid_value", "everyMs")
	}
	for _, v := range []string{"1000.5", "1e4", `"60000"`} {
		body("everyMs "+v, "/v1/tasks", task(v), 400, "invalid_request", "everyMs")
	}
	f.run(t, cases)
}

// TestBadSchedules: a task's schedule is five-field cron read in UTC or an
// interval: a descriptor (@every 1ms, @hourly, …), a time zone prefix (TZ=,
// CRON_TZ=), any other number of fields, a value out of range, a cron that
// never fires or one over 256 bytes is 422 invalid_value. A task in a
// closed conversation is 409 conversation_closed, and one more than the
// agent may have is 409 busy. Nothing is written.
func TestBadSchedules(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	closed := f.conversation("alice")
	f.want(f.do("POST", "/v1/conversations/"+closed+"/messages", f.alice, map[string]any{"content": "bye", "finality": "conversation"}), 201, "")
	var cases []badCase
	for _, cron := range []string{
		"@every 1ms", "@every 1s", "@every 1h", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually", "@reboot",
		"TZ=Europe/Paris 0 9 * * *", "CRON_TZ=UTC 0 9 * * *", "TZ=UTC @every 1ms", "CRON_TZ=Asia/Tokyo * * * * *",
		"0 0 9 * * *", "0 9 * *", "*", "0 9 * * * *", "61 * * * *", "* 24 * * *", "* * 32 * *", "* * * 13 *", "* * * * 8",
		"0 0 30 2 *", "0 9 * * " + strings.Repeat("1,", 130) + "1", "0 9 * * mon @", "0 9 * * =1",
	} {
		body, _ := json.Marshal(map[string]any{"conversationId": f.c, "prompt": "x", "cron": cron})
		cases = append(cases, badCase{"cron " + cron, "POST", "/v1/tasks", "bob", string(body), nil, 422, "invalid_value", "cron"})
	}
	cases = append(cases,
		badCase{"cron and everyMs", "POST", "/v1/tasks", "bob", `{"conversationId":"{c}","prompt":"x","cron":"0 9 * * *","everyMs":60000}`, nil, 422, "invalid_value", "either"},
		badCase{"no schedule", "POST", "/v1/tasks", "bob", `{"conversationId":"{c}","prompt":"x"}`, nil, 422, "invalid_value", "either"},
		badCase{"closed conversation", "POST", "/v1/tasks", "bob", `{"conversationId":"` + closed + `","prompt":"x","cron":"0 9 * * *"}`, nil, 409, "conversation_closed", "closed"},
		badCase{"one task too many", "POST", "/v1/tasks", "alice", `{"conversationId":"{c}","prompt":"x","cron":"0 9 * * *"}`, nil, 409, "busy", "delete one first"},
		badCase{"one task too many, named by an admin", "POST", "/v1/tasks", "admin", `{"agentId":"alice","conversationId":"{c2}","prompt":"x","everyMs":1000}`, nil, 409, "busy", "delete one first"},
	)
	f.run(t, cases)
}
