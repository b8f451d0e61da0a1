package e2e

// The turn contention of the chaos test: two agents, each through its own
// node, race to take turn after turn of one conversation with claims and
// startingTurn preconditions; and the check, over every conversation's
// final log, that a turn never had two owners.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// claimTTL is how long a claimer's claim holds: short, so that a claim
// whose node dies lapses within the test and the other agent takes the
// turn.
const claimTTL = 800 * time.Millisecond

// claimer takes turns in conv until ctx ends: it claims the next turn,
// opens it with a message that must start that very turn (precondition
// expectTurn and startingTurn), and closes it with a second message. A
// claim it loses (the other agent holds the turn or the claim), or a
// claim that lapsed before it opened the turn, sends it back to claiming.
// A write whose answer was lost is sent again with the same
// clientRequestId, as the HTTP writers do.
func claimer(ctx context.Context, l *ledger, base, conv, agent string) {
	c := client.New(base, "")
	for i := 0; ctx.Err() == nil; i++ {
		r, err := until(ctx, l, agent, func() (*client.TurnResult, error) {
			return c.ClaimWith(ctx, conv, client.ClaimOptions{AgentID: agent, TTL: claimTTL})
		})
		if err != nil {
			continue // lost it: claim again
		}
		l.add(ack{conv: conv, seq: r.Seq, kind: "claim", msgID: agent, text: fmt.Sprint(r.Turn)})
		for k, fin := range []parley.Finality{parley.FinalityNone, parley.FinalityTurn} {
			id := fmt.Sprintf("%s-%d-%d", agent, i, k)
			m := client.Message{ID: id, AgentID: agent, Content: "turn of " + id, ClientRequestID: "req-" + id, Finality: fin,
				Precondition: &client.Precondition{ExpectTurn: r.Turn, StartingTurn: k == 0}}
			res, err := until(ctx, l, agent, func() (*client.MessageResult, error) { return c.PostMessage(ctx, conv, m) })
			if err != nil {
				if k == 1 && ctx.Err() == nil {
					l.fail("claimer %s: closing its turn %d: %v", agent, r.Turn, err)
				}
				break // the claim lapsed and the other agent took the turn
			}
			l.add(ack{conv: conv, seq: res.Seq, kind: "message", msgID: id, text: m.Content})
		}
		pause(ctx, 20*time.Millisecond) // a turn every few tens of milliseconds: contention, not load
	}
}

// until makes a request until the server answers it (through crashes:
// the node may be down, or restarting), and returns its answer, or the
// conflict that refused it (the other agent won).
func until[T any](ctx context.Context, l *ledger, agent string, do func() (T, error)) (T, error) {
	for {
		res, err := do()
		var se *client.StatusError
		switch code := parley.ErrorCode(err); {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return res, ctx.Err()
		case code == parley.ECLAIMCONFLICT || code == parley.ETURNCONFLICT || code == parley.EPRECONDITION:
			// The other agent holds the turn for a few requests more: look
			// again soon, not at once (spinning would starve the nodes).
			pause(ctx, time.Duration(5+rand.IntN(10))*time.Millisecond)
			return res, err
		case code == parley.EBUSY:
			pause(ctx, 5*time.Millisecond) // other nodes won several times in a row: retry
		case errors.As(err, &se) && se.Status < 500:
			l.fail("claimer %s: refused: %v", agent, err)
			pause(ctx, time.Second)
			return res, err
		default:
			pause(ctx, 20*time.Millisecond) // the node is down
		}
	}
}

// checkTurns checks, over a conversation's whole log, that a turn never
// had two owners at once (see turnsOf), and returns how many turns and
// claims the log holds.
func checkTurns(t *testing.T, conv string, evs []parley.Event) (turns, claims int) {
	t.Helper()
	turns, claims, err := turnsOf(evs)
	if err != nil {
		t.Fatalf("conversation %s: %v", conv, err)
	}
	return turns, claims
}

// turnsOf reads the turns of a log and returns the first sign of two
// owners of a turn at once: turn numbers go up by one; a turn, once
// opened, is written only by the agent that opened it (the load has no
// delegates) until it closes; no turn is claimed, or opened, while
// another agent's claim of it holds; and a turn is claimed only when it is
// the next one and none is open. It counts the turns and claims.
func turnsOf(evs []parley.Event) (turns, claims int, err error) {
	last, open, owner := 0, false, ""
	var claim *parley.Claim // the claim of the next turn, until it lapses or is taken up
	held := func(at parley.Time, agent string) bool {
		return claim != nil && claim.AgentID != agent && at.Before(claim.ExpiresAt.Time)
	}
	for _, e := range evs {
		switch e.Type {
		case parley.EventTurnClaimed:
			var c parley.Claim
			if err := json.Unmarshal(e.Data, &c); err != nil {
				return turns, claims, fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			switch {
			case open || c.Turn != last+1:
				return turns, claims, fmt.Errorf("seq %d: %s claimed turn %d after turn %d (open: %v, owned by %q)", e.Seq, c.AgentID, c.Turn, last, open, owner)
			case held(e.Time, c.AgentID):
				return turns, claims, fmt.Errorf("seq %d: %s claimed turn %d while %s held it until %s: two winners", e.Seq, c.AgentID, c.Turn, claim.AgentID, claim.ExpiresAt.Format(parley.TimeLayout))
			}
			claim = &c
			claims++
		case parley.EventClaimExpired:
			claim = nil
		case parley.EventMessage, parley.EventMessageUpdated, parley.EventChunk, parley.EventPartUpdated, parley.EventTrace:
			switch {
			case open && (e.Turn != last || e.AgentID != owner):
				return turns, claims, fmt.Errorf("seq %d: %s wrote turn %d while turn %d, opened by %s, was open", e.Seq, e.AgentID, e.Turn, last, owner)
			case !open && e.Turn != last+1:
				return turns, claims, fmt.Errorf("seq %d: %s wrote turn %d after turn %d closed", e.Seq, e.AgentID, e.Turn, last)
			case !open && held(e.Time, e.AgentID):
				return turns, claims, fmt.Errorf("seq %d: %s opened turn %d while %s's claim of it held until %s", e.Seq, e.AgentID, e.Turn, claim.AgentID, claim.ExpiresAt.Format(parley.TimeLayout))
			case !open:
				last, open, owner, claim = e.Turn, true, e.AgentID, nil
				turns++
			}
			if e.Finality == parley.FinalityTurn || e.Finality == parley.FinalityConversation {
				open = false
			}
		}
	}
	return turns, claims, nil
}

// TestTurnsOfFindsTwoOwners: the chaos test's check of turns passes a log
// where two agents take turns, and finds each way a turn may have had two
// owners.
func TestTurnsOfFindsTwoOwners(t *testing.T) {
	at := func(ms int) parley.Time {
		return parley.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond))
	}
	claim := func(agent string, turn, ms, ttl int) parley.Event {
		data, _ := json.Marshal(parley.Claim{AgentID: agent, Turn: turn, ExpiresAt: at(ms + ttl)})
		return parley.Event{Type: parley.EventTurnClaimed, Turn: turn, AgentID: agent, Finality: parley.FinalityNone, Time: at(ms), Data: data}
	}
	msg := func(agent string, turn, ms int, fin parley.Finality) parley.Event {
		return parley.Event{Type: parley.EventMessage, Turn: turn, AgentID: agent, Finality: fin, Time: at(ms), Data: []byte(`{}`)}
	}
	expired := parley.Event{Type: parley.EventClaimExpired, Finality: parley.FinalityNone, Time: at(1800)}
	good := []parley.Event{
		claim("a", 1, 0, 800), msg("a", 1, 10, parley.FinalityNone), msg("a", 1, 20, parley.FinalityTurn),
		claim("b", 2, 30, 800), claim("a", 2, 900, 800), // b's claim lapsed unused
		msg("a", 2, 910, parley.FinalityTurn),
		claim("b", 3, 920, 800), expired, msg("a", 3, 1800, parley.FinalityTurn), // b's claim ended by claim.expired
	}
	if turns, claims, err := turnsOf(good); err != nil || turns != 3 || claims != 4 {
		t.Fatalf("a good log: %d turns, %d claims, %v; want 3, 4, none", turns, claims, err)
	}
	for name, log := range map[string][]parley.Event{
		"another agent writes an open turn": {msg("a", 1, 0, parley.FinalityNone), msg("b", 1, 10, parley.FinalityTurn)},
		"a turn skipped":                    {msg("a", 1, 0, parley.FinalityTurn), msg("b", 3, 10, parley.FinalityTurn)},
		"a new turn while one is open":      {msg("a", 1, 0, parley.FinalityNone), msg("b", 2, 10, parley.FinalityTurn)},
		"two claim winners":                 {claim("a", 1, 0, 800), claim("b", 1, 10, 800)},
		"opened under another's claim":      {claim("a", 1, 0, 800), msg("b", 1, 10, parley.FinalityTurn)},
		"claimed while a turn is open":      {msg("a", 1, 0, parley.FinalityNone), claim("b", 2, 10, 800)},
	} {
		if _, _, err := turnsOf(log); err == nil {
			t.Errorf("%s: not found", name)
		}
	}
}

// claimAcked reports whether event e is the claim a (its agent in msgID,
// its turn in text).
func claimAcked(a ack, e parley.Event) bool {
	return e.Type == parley.EventTurnClaimed && e.AgentID == a.msgID && fmt.Sprint(e.Turn) == a.text
}
