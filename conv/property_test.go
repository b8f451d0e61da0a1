package conv_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
)

var agents = []string{"a", "b", "c", "d"}

// step turns a few random numbers into one command (or a clock move) and
// runs it, then checks every invariant. next returns a number in [0, n).
func step(sc *script, next func(n int) int) {
	agent := agents[next(len(agents))]
	act := conv.Actor{AgentID: agent}
	var cmd conv.Command
	switch next(10) {
	case 0, 1, 2, 3:
		m := say(agent, []parley.Finality{parley.FinalityNone, parley.FinalityTurn}[next(2)])
		if next(64) == 0 { // rarely, so that most sequences run long before closing
			m.Finality = parley.FinalityConversation
		}
		switch next(3) {
		case 1:
			m = starting(m, sc.s.LastTurn+next(3)-1)
		case 2:
			m = continuing(m, sc.s.LastTurn+next(3)-1)
		}
		if next(3) == 0 && len(sc.msgs) > 0 {
			m.ReplyTo = fmt.Sprintf("m%d", 1+next(sc.ids))
		}
		if next(10) == 0 {
			m.Role = parley.RoleUser
		}
		cmd = m
	case 4:
		cmd = conv.PostTrace{Actor: act, Payload: json.RawMessage(`{}`)}
	case 5:
		cmd = conv.ClaimTurn{Actor: act, TTL: time.Duration(1+next(20)) * time.Second}
	case 6:
		cmd = conv.ResetTurn{Actor: act, Claim: next(2) == 0}
	case 7:
		cmd = conv.AbortTurn{Actor: act}
	case 8:
		cmd = conv.Delegate{Actor: act, To: agents[next(len(agents))]}
	default:
		sc.advance(time.Duration(next(15)) * time.Second)
		cmd = conv.ExpireClaim{}
	}
	wasClosed := sc.s.Closed
	d, err := sc.do(cmd)
	if err == nil && wasClosed && len(d.Events) > 0 {
		sc.t.Fatalf("%T accepted after the conversation closed: %s", cmd, types(d.Events))
	}
	checkInvariants(sc)
}

// checkInvariants checks the state and the whole log.
func checkInvariants(sc *script) {
	t := sc.t
	t.Helper()
	replay := conv.Evolve(conv.State{}, sc.log...)
	if mustJSON(replay) != mustJSON(sc.s) {
		t.Fatalf("folding the log gives another state:\n%s\n%s", mustJSON(replay), mustJSON(sc.s))
	}
	var round conv.State
	if err := json.Unmarshal([]byte(mustJSON(sc.s)), &round); err != nil || mustJSON(round) != mustJSON(sc.s) {
		t.Fatalf("state does not survive JSON: %v", err)
	}
	owners := map[int]string{}
	delegates := map[int][]string{}
	closedTurns := map[int]bool{}
	lastTurn, closed := 0, false
	for i, e := range sc.log {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if closed && e.Type != parley.EventClaimExpired {
			t.Fatalf("event %d (%s) after the conversation closed", e.Seq, e.Type)
		}
		if e.Finality != parley.FinalityNone && e.Type != parley.EventMessage && e.Type != parley.EventMessageUpdated && e.Type != parley.EventTurnAborted {
			t.Fatalf("%s event %d has finality %s", e.Type, e.Seq, e.Finality)
		}
		switch e.Type {
		case parley.EventMessage, parley.EventTrace, parley.EventTurnReset, parley.EventDelegation, parley.EventTurnAborted,
			parley.EventChunk, parley.EventMessageUpdated:
			if e.Turn == 0 {
				break
			}
			if e.Turn < lastTurn {
				t.Fatalf("event %d in turn %d after turn %d", e.Seq, e.Turn, lastTurn)
			}
			if closedTurns[e.Turn] {
				t.Fatalf("event %d writes to closed turn %d", e.Seq, e.Turn)
			}
			if _, ok := owners[e.Turn]; !ok {
				if e.Turn != lastTurn+1 {
					t.Fatalf("turn %d opened after turn %d", e.Turn, lastTurn)
				}
				if closedTurns[lastTurn] == false && lastTurn > 0 {
					t.Fatalf("turn %d opened while turn %d is open", e.Turn, lastTurn)
				}
				owners[e.Turn] = e.AgentID
				lastTurn = e.Turn
			}
			ok := e.AgentID == owners[e.Turn] || slices.Contains(delegates[e.Turn], e.AgentID) || e.Type == parley.EventTurnAborted
			if !ok {
				t.Fatalf("event %d by %s in turn %d owned by %s", e.Seq, e.AgentID, e.Turn, owners[e.Turn])
			}
			if e.Type == parley.EventDelegation {
				var dl parley.Delegation
				_ = json.Unmarshal(e.Data, &dl)
				delegates[e.Turn] = append(delegates[e.Turn], dl.To)
			}
			if e.Finality != parley.FinalityNone {
				closedTurns[e.Turn] = true
			}
		}
		if e.Finality == parley.FinalityConversation {
			closed = true
		}
	}
	if sc.s.Closed != closed || sc.s.LastTurn != lastTurn {
		t.Fatalf("state closed %v lastTurn %d, log says %v %d", sc.s.Closed, sc.s.LastTurn, closed, lastTurn)
	}
	if (sc.s.Open != nil) != (lastTurn > 0 && !closedTurns[lastTurn]) {
		t.Fatalf("state open turn %+v, log says turn %d closed=%v", sc.s.Open, lastTurn, closedTurns[lastTurn])
	}
	if g := sc.s.Guidance(sc.now); g != nil && (g.Turn < 1 || g.AfterSeq != sc.s.LastSeq) {
		t.Fatalf("guidance %+v", g)
	}
	if sc.s.Closed && sc.s.Guidance(sc.now) != nil {
		t.Fatal("guidance after close")
	}
}

func TestRandomCommandSequences(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		sc := newScript(t, []parley.TurnPolicy{parley.PolicyRoundRobin, parley.PolicyFree, parley.PolicyNext}[seed%3], "a", "b", "c")
		for i := 0; i < 200; i++ {
			step(sc, rng.IntN)
		}
	}
}

// FuzzDecide reads the fuzz input as a sequence of commands and checks the
// invariants after each.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 5, 2, 6, 1, 0, 3, 7, 7, 7, 2, 2, 9, 9, 9, 4})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice over"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := newScript(t, parley.PolicyRoundRobin, "a", "b", "c")
		pos := 0
		next := func(n int) int {
			if pos >= len(data) {
				return 0
			}
			v := int(data[pos]) % n
			pos++
			return v
		}
		for pos < len(data) {
			step(sc, next)
		}
	})
}
