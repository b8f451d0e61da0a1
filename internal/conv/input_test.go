package conv_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// askIn opens approval request id in the streaming message of st.
func askIn(t *testing.T, st *streamer, id string, expires time.Duration) conv.Decision {
	t.Helper()
	r := parley.InputRequest{RequestID: id, Kind: parley.InputApproval, Title: "May I?"}
	if expires > 0 {
		r.ExpiresAt = parley.NewTime(st.sc.now.Add(expires))
	}
	d := st.sc.ok(conv.AskInput{Actor: conv.Actor{AgentID: st.agent}, MessageID: st.id, Request: r})
	st.msg = d.Result.Message
	return d
}

// outcomes returns the status of each input request of the message, as
// the script's readers assembled it, by request id.
func outcomes(sc *script, messageID string) map[string]string {
	m := sc.live[messageID]
	if m == nil {
		m = sc.msgs[messageID]
	}
	out := map[string]string{}
	for _, p := range m.Parts {
		if p.Type == parley.PartInputRequest {
			out[p.RequestID] = p.Status + "/" + p.Reason
		}
	}
	return out
}

// TestInputRequestsEndWithTheirAnswer: every way an answer stops ends the
// requests it has pending, canceled, with a reason; an expiry ends one
// expired only once it has passed. What is written is what the fold of
// the log gives (the script checks the fold after every command).
func TestInputRequestsEndWithTheirAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		end    func(sc *script, st *streamer)
		reason string
	}{
		{"the message is finalized", func(sc *script, st *streamer) {
			sc.ok(conv.FinalizeMessage{Actor: actor(st.agent), MessageID: st.id, Reason: parley.FinishEndTurn, Known: st.known()})
		}, conv.ReasonFinalized},
		{"its owner aborts the turn", func(sc *script, st *streamer) {
			sc.ok(conv.AbortTurn{Actor: actor(st.agent), Reason: "gave up"})
		}, conv.ReasonTurnAborted},
		{"an admin aborts the turn", func(sc *script, st *streamer) {
			sc.ok(conv.AbortTurn{Actor: conv.Actor{AgentID: "ops", Admin: true}})
		}, conv.ReasonTurnAborted},
		{"the message is reverted", func(sc *script, st *streamer) {
			sc.ok(conv.Revert{Actor: conv.Actor{AgentID: "ops", Admin: true}, MessageID: st.id})
		}, conv.ReasonReverted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sc := newScript(t, parley.PolicyFree)
			st := startStream(t, sc, "bot", "r1")
			askIn(t, st, "q1", 0)
			askIn(t, st, "q2", 0)
			if p := sc.s.Pending(); len(p) != 2 || p[0].RequestID != "q1" || p[1].RequestID != "q2" {
				t.Fatalf("pending: %+v", p)
			}
			if !st.msg.AwaitingInput {
				t.Fatal("the message does not say it awaits input")
			}
			c.end(sc, st)
			if p := sc.s.Pending(); len(p) != 0 {
				t.Fatalf("still pending: %+v", p)
			}
			var ended []parley.InputAnswered
			for _, e := range sc.log {
				if e.Type == parley.EventInputAnswered {
					var a parley.InputAnswered
					_ = json.Unmarshal(e.Data, &a)
					ended = append(ended, a)
				}
			}
			if len(ended) != 2 || ended[0].Status != parley.InputStatusCanceled || ended[0].Reason != c.reason || ended[1].RequestID != "q2" {
				t.Fatalf("the log ends the requests with %+v; want both canceled (%s)", ended, c.reason)
			}
			if _, err := sc.do(conv.AnswerInput{Actor: conv.Actor{AgentID: "ops", Admin: true}, RequestID: "q1", Answer: json.RawMessage(`{"approved":true}`)}); parley.ErrorCode(err) == "" {
				t.Fatal("a canceled request took an answer")
			}
			if m := sc.msgs["r1"]; c.reason == conv.ReasonFinalized && (outcomes(sc, "r1")["q1"] != "canceled/finalized" || m.AwaitingInput) {
				t.Fatalf("the finished message holds %v (awaitingInput %v)", outcomes(sc, "r1"), m.AwaitingInput)
			}
		})
	}

	t.Run("expiry", func(t *testing.T) {
		t.Parallel()
		sc := newScript(t, parley.PolicyFree)
		st := startStream(t, sc, "bot", "r1")
		askIn(t, st, "soon", time.Minute)
		askIn(t, st, "never", 0)
		if next := sc.s.NextInputExpiry(); !next.Equal(sc.now.Add(time.Minute)) {
			t.Fatalf("next expiry %v", next)
		}
		if d := sc.ok(conv.ExpireInputs{}); len(d.Events) != 0 {
			t.Fatalf("an expiry before its time wrote %s", types(d.Events))
		}
		sc.advance(time.Minute)
		if _, err := sc.do(conv.AnswerInput{Actor: conv.Actor{Admin: true}, RequestID: "soon", Answer: json.RawMessage(`{"approved":true}`)}); parley.ErrorCode(err) != parley.EINPUTENDED {
			t.Fatalf("an answer at its expiry: %v", err)
		}
		if d := sc.ok(conv.ExpireInputs{}); types(d.Events) != "input.answered" {
			t.Fatalf("the expiry wrote %s", types(d.Events))
		}
		if got := outcomes(sc, "r1"); got["soon"] != "expired/expired" || got["never"] != "pending/" {
			t.Fatalf("after the expiry: %v", got)
		}
		if !sc.s.NextInputExpiry().IsZero() {
			t.Fatal("an expiry is still armed")
		}
	})
}

// TestInputRequestAcknowledged: only the asking agent acknowledges, only an
// outcome; once acknowledged the request leaves the state, and the same
// answer again is still the first one's result.
func TestInputRequestAcknowledged(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	st := startStream(t, sc, "bot", "r1")
	askIn(t, st, "q1", 0)
	if _, err := sc.do(conv.AckInput{Actor: actor("bot"), RequestID: "q1"}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("an ack of a pending request: %v", err)
	}
	answer := conv.AnswerInput{Actor: conv.Actor{AgentID: "ops", Admin: true}, RequestID: "q1", Answer: json.RawMessage(`{ "approved" : true }`)}
	first := sc.ok(answer)
	if err := conv.Authorize(sc.s, conv.AckInput{Actor: actor("eve"), RequestID: "q1"}); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("another agent's ack: %v", err)
	}
	if err := conv.Authorize(sc.s, conv.AnswerInput{Actor: conv.Actor{AgentID: "bot", Admin: true}, RequestID: "q1"}); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("the asking agent answering, even as an admin: %v", err)
	}
	if d := sc.ok(conv.AckInput{Actor: actor("bot"), RequestID: "q1"}); types(d.Events) != "input.acked" {
		t.Fatalf("the ack wrote %s", types(d.Events))
	}
	if d := sc.ok(conv.AckInput{Actor: actor("bot"), RequestID: "q1"}); len(d.Events) != 0 {
		t.Fatalf("a second ack wrote %s", types(d.Events))
	}
	if len(sc.s.Inputs) != 0 {
		t.Fatalf("after the ack the state holds %+v", sc.s.Inputs)
	}
	answer.Answer = json.RawMessage(`{"approved":true}`)
	if again := sc.ok(answer); len(again.Events) != 0 || again.Result.Seq != first.Result.Seq {
		t.Fatalf("the same answer again: %s, seq %d (first %d)", types(again.Events), again.Result.Seq, first.Result.Seq)
	}
	answer.Answer = json.RawMessage(`{"approved":false}`)
	if _, err := sc.do(answer); parley.ErrorCode(err) != parley.EINPUTENDED {
		t.Fatalf("another answer: %v", err)
	}
}

// TestImpliedAnswerSchemas: without a schema, what an approval and a
// question take.
func TestImpliedAnswerSchemas(t *testing.T) {
	t.Parallel()
	approval := parley.Part{Type: parley.PartInputRequest, Kind: parley.InputApproval}
	one := parley.Part{Type: parley.PartInputRequest, Kind: parley.InputQuestion, Options: []parley.InputOption{{Label: "a"}, {Label: "b"}}}
	many := one
	many.Multiple = true
	free := parley.Part{Type: parley.PartInputRequest, Kind: parley.InputQuestion}
	cases := []struct {
		p      parley.Part
		answer string
		ok     bool
	}{
		{approval, `{"approved":true}`, true},
		{approval, `{"approved":false,"reason":"no"}`, true},
		{approval, `{"approved":1}`, false},
		{approval, `{}`, false},
		{approval, `true`, false},
		{one, `{"choices":["a"]}`, true},
		{one, `{"choices":["a","b"]}`, false},
		{one, `{"choices":["c"]}`, false},
		{one, `{"choices":[]}`, false},
		{one, `{"text":"something else"}`, true},
		{one, `{"choices":["a"],"text":"x"}`, false},
		{many, `{"choices":["a","b"]}`, true},
		{many, `{"choices":["a","a"]}`, false},
		{free, `{"text":"x"}`, true},
		{free, `{"text":""}`, false},
		{free, `"x"`, false},
		{free, `{"text":`, false},
	}
	for _, c := range cases {
		_, err := conv.CheckAnswer(c.p, json.RawMessage(c.answer))
		if (err == nil) != c.ok {
			t.Errorf("%s to %s %v: %v", c.answer, c.p.Kind, c.p.Options, err)
		}
	}
}

// TestInputRequestWithdrawn: the agent that asked takes a request back
// (it was answered some other way); nobody else may; a request that ended
// is left as it is.
func TestInputRequestWithdrawn(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	st := startStream(t, sc, "bot", "r1")
	askIn(t, st, "q1", 0)
	askIn(t, st, "q2", 0)
	if err := conv.Authorize(sc.s, conv.WithdrawInput{Actor: conv.Actor{AgentID: "ops", Admin: true}, RequestID: "q1"}); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("another agent's withdraw: %v", err)
	}
	d := sc.ok(conv.WithdrawInput{Actor: actor("bot"), RequestID: "q1", Reason: "answered in OpenCode"})
	if types(d.Events) != "input.answered" || outcomes(sc, "r1")["q1"] != "canceled/answered in OpenCode" {
		t.Fatalf("the withdraw wrote %s; q1 is %v", types(d.Events), outcomes(sc, "r1"))
	}
	if again := sc.ok(conv.WithdrawInput{Actor: actor("bot"), RequestID: "q1"}); len(again.Events) != 0 || again.Result.Seq != d.Result.Seq {
		t.Fatalf("a second withdraw: %s, seq %d", types(again.Events), again.Result.Seq)
	}
	sc.ok(conv.WithdrawInput{Actor: actor("bot"), RequestID: "q2"})
	if got := outcomes(sc, "r1")["q2"]; got != "canceled/"+conv.ReasonWithdrawn {
		t.Fatalf("q2 is %s", got)
	}
	if _, err := sc.do(conv.WithdrawInput{Actor: actor("bot"), RequestID: "nope"}); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("an unknown request: %v", err)
	}
}
