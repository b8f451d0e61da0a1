package conv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// The agents of random sequences: participants, a worker that is never one
// (it writes when delegated to, or opens turns of its own), and a person.
var (
	agents  = []string{"a", "b", "c", "d"}
	writers = []string{"a", "b", "c", "d", "a", "b", "worker", "human"}
)

// gen turns numbers from next (each in [0, n)) into commands that are often
// right and often wrong: random preconditions around the last turn, random
// finalities, claims, resets, aborts, delegations, streams, prompts, reverts,
// retries under the same clientRequestId, and time moving on.
type gen struct {
	sc   *script
	next func(n int) int
	keys []string // clientRequestIds used so far, as agent/key
	// fullEvery is how often (in steps) the whole log is folded again from
	// its start; 1 (or 0) folds it after every step.
	fullEvery, steps int
}

func (g *gen) pick(xs []string) string { return xs[g.next(len(xs))] }

func (g *gen) chance(n int) bool { return g.next(n) == 0 }

// agent is mostly the owner of the open turn, so that turns run on and close.
func (g *gen) agent() string {
	if o := g.sc.s.Open; o != nil && g.chance(2) {
		return o.Owner
	}
	return g.pick(writers)
}

func (g *gen) precondition() *parley.Precondition {
	if g.next(4) < 2 {
		return nil
	}
	return &parley.Precondition{ExpectTurn: g.sc.s.LastTurn + g.next(4) - 1, StartingTurn: g.chance(2)}
}

func (g *gen) finality() parley.Finality {
	switch {
	case g.chance(90): // rarely, so that most sequences run long before closing
		return parley.FinalityConversation
	case g.chance(40):
		return "forever"
	case g.chance(2):
		return parley.FinalityTurn
	}
	return parley.FinalityNone
}

// id is a new id, an id already used (by a message or a prompt, now or
// before), or (rarely) no valid id at all.
func (g *gen) id(prefix string) string {
	switch {
	case g.chance(12) && len(g.sc.taken) > 0:
		return g.pick(g.sc.taken)
	case g.chance(60):
		return "not valid!"
	}
	g.sc.ids++
	return fmt.Sprintf("%s%d", prefix, g.sc.ids)
}

func (g *gen) message() conv.Command {
	sc := g.sc
	m := say(g.agent(), g.finality())
	m.ID = g.id("m")
	m.Precondition = g.precondition()
	switch g.next(8) {
	case 0:
		m.Role = parley.RoleUser
	case 1:
		m.Role, m.Actor, m.Precondition = parley.RoleSystem, conv.Actor{AgentID: "ops", Admin: !g.chance(5)}, nil
	case 2:
		m.Parts, m.Finality, m.Streaming = nil, parley.FinalityNone, true
	}
	if len(sc.order) > 0 && g.chance(3) {
		m.ReplyTo = g.pick(sc.order)
	} else if g.chance(30) {
		m.ReplyTo = []string{"ghost", m.ID}[g.next(2)]
	}
	if g.chance(8) {
		m.TurnID = []string{sc.s.LastTurnID, "ghost", m.ID}[g.next(3)]
	}
	if len(sc.order) > 0 && g.chance(20) {
		m.RetryOf = g.pick(sc.order)
	}
	if m.Finality == parley.FinalityTurn && g.chance(3) {
		m.Next = g.pick(agents)
	}
	if g.chance(15) {
		m.Parts = append(m.Parts, parley.Part{Type: parley.PartToolCall, ToolName: "t", Status: "running"}) // no callId
	}
	g.idempotency(m.AgentID, &m.ClientRequestID, &m.RequestHash)
	return m
}

// idempotency gives a write a new clientRequestId, or one used before (with
// the same or another body hash), or none.
func (g *gen) idempotency(agent string, key, hash *string) {
	switch g.next(6) {
	case 0:
		*key = fmt.Sprintf("req-%d", len(g.keys))
		g.keys = append(g.keys, agent+"/"+*key)
		*hash = "h-" + *key
	case 1:
		for _, k := range g.keys {
			if a, rest, _ := strings.Cut(k, "/"); a == agent && g.chance(2) {
				*key, *hash = rest, "h-"+rest
				if g.chance(3) {
					*hash = "other body"
				}
				return
			}
		}
	}
}

func (g *gen) stream() conv.Command {
	ids := slices.Sorted(maps.Keys(g.sc.live))
	if len(ids) == 0 {
		return g.message()
	}
	id := g.pick(ids)
	a := actor(g.sc.live[id].AgentID)
	if g.chance(8) {
		a = actor(g.pick(writers))
	}
	switch g.next(4) {
	case 0:
		u := conv.ToolUpdate{CallID: fmt.Sprintf("call%d", g.next(3)), ToolName: "search", Status: []string{"running", "completed", "bogus"}[g.next(3)]}
		if g.chance(2) {
			u.Args = quoted(2 + g.next(3)*150) // the same args again, or others
		}
		if g.chance(3) {
			u.Result = quoted(2 + g.next(3)*100)
		}
		if g.chance(4) {
			u.ToolName = "" // an update of a known call may leave it out
		}
		return conv.StreamTool{Actor: a, MessageID: id, Tool: u}
	case 1:
		fin := []parley.Finality{"", "", parley.FinalityNone, parley.FinalityTurn, parley.FinalityConversation}[g.next(5)]
		if fin == parley.FinalityConversation && !g.chance(10) {
			fin = ""
		}
		f := conv.FinalizeMessage{Actor: a, MessageID: id, Reason: []string{parley.FinishEndTurn, parley.FinishCanceled, parley.FinishError}[g.next(3)], Finality: fin, EndsPrompt: g.chance(2)}
		if g.chance(6) {
			f.Error = strings.Repeat("e", 1+g.next(3)*150)
		}
		if g.chance(6) {
			// A finalText that only a message with no text yet takes
			// whole; one with text refuses it (it must start with it).
			f.FinalText = strings.Repeat("f", 1+g.next(3)*250)
		}
		return f
	}
	return conv.StreamText{Actor: a, MessageID: id, Delta: []string{"x", "x", "x", strings.Repeat("y", 120)}[g.next(4)]}
}

// randomLimits are the limits of a random sequence: the defaults for even
// seeds; for odd ones, small bounds on a message's size and on the messages
// streaming at once, and frequent checkpoints, so that refusals of size
// and rows rewritten by chunk and part.updated events are common.
func randomLimits(seed uint64) conv.Limits {
	l := conv.DefaultLimits
	if seed%2 == 1 {
		l.MaxMessageBytes, l.MaxTextBytes, l.MaxStreaming = 300, 200, 2
		l.CheckpointChunks, l.CheckpointBytes = 3, 100
	}
	return l
}

func (g *gen) prompt() conv.Command {
	var ids []string
	for _, p := range g.sc.s.Queue {
		ids = append(ids, p.ID)
	}
	ids = append(ids, "p-ghost")
	runner := g.pick(agents) // mostly the runner of the prompt being answered
	if a := g.sc.s.Active(); a != nil && !g.chance(4) {
		runner = a.Runner
	}
	switch g.next(10) {
	case 0, 8:
		return conv.DispatchPrompt{Runner: g.pick(agents), Content: "do it"}
	case 6:
		return conv.AbortPrompt{Actor: actor("human")}
	case 7:
		c := conv.CompletePrompt{Actor: actor(runner), Aborted: g.chance(2)}
		if g.chance(2) {
			c.ID = g.pick(ids)
		}
		return c
	case 5:
		g.sc.ids++
		task := parley.Task{ID: "task-1", AgentID: "cron", Prompt: "report", NextRunAt: parley.NewTime(g.sc.now)}
		return conv.RunTask{Task: task, RunID: fmt.Sprintf("run%d", g.sc.ids), PromptID: fmt.Sprintf("p%d", g.sc.ids),
			Next: parley.NewTime(g.sc.now.Add(time.Minute)), Due: !g.chance(4)}
	case 1:
		return conv.CompletePrompt{Actor: actor(runner)}
	case 2:
		return conv.RequeuePrompt{Runner: runner}
	case 3:
		return conv.WithdrawPrompt{Actor: actor("human"), ID: g.pick(ids)}
	case 4:
		return conv.PromotePrompt{Actor: actor("human"), ID: g.pick(ids)}
	}
	return conv.EnqueuePrompt{Actor: actor("human"), ID: g.id("p"), Content: "do it",
		Mode: []string{"", conv.ModeSteer, conv.ModeCollect, conv.ModeReject}[g.next(4)], Window: time.Second}
}

// command returns the next command, or nil after moving the clock.
func (g *gen) command() conv.Command {
	sc := g.sc
	a := actor(g.agent())
	switch g.next(20) {
	case 0, 1, 2, 3, 4, 5:
		return g.message()
	case 6:
		tr := conv.PostTrace{Actor: a, ID: g.id("t"), Payload: json.RawMessage(`{}`), Precondition: g.precondition()}
		if g.chance(6) {
			tr.Finality = parley.FinalityTurn
		}
		g.idempotency(tr.AgentID, &tr.ClientRequestID, &tr.RequestHash)
		return tr
	case 7:
		c := claim(g.pick(writers), time.Duration(1+g.next(20))*time.Second)
		if g.chance(3) {
			c.ExpectTurn = sc.s.LastTurn + g.next(3)
		}
		return c
	case 8:
		return conv.ResetTurn{Actor: a, Claim: g.chance(2), TTL: time.Duration(g.next(20)) * time.Second}
	case 9:
		if g.chance(5) {
			return conv.AbortTurn{Actor: admin}
		}
		return conv.AbortTurn{Actor: a, Reason: "gave up"}
	case 10:
		return conv.Delegate{Actor: a, To: g.pick(append([]string{"worker", "sub-worker"}, agents...))}
	case 11, 12, 13:
		return g.stream()
	case 14:
		return g.prompt()
	case 15:
		if len(sc.order) > 0 && g.chance(6) {
			return conv.Revert{Actor: a, MessageID: g.pick(sc.order)}
		}
		return conv.ExpireClaim{}
	}
	sc.advance(time.Duration(g.next(12)) * time.Second)
	if g.chance(2) {
		return conv.ExpireClaim{}
	}
	if g.chance(2) {
		// A turn lease of a few seconds ends an open turn whose owner has
		// no runner (the agents picked as runners here have one).
		return conv.ExpireTurn{Lease: time.Duration(1+g.next(8)) * time.Second, Runners: []string{g.pick(agents)}}
	}
	return nil
}

// step runs one random command and checks every invariant after it.
func (g *gen) step() {
	if cmd := g.command(); cmd != nil {
		_, _ = g.sc.do(cmd)
	}
	g.steps++
	checkState(g.sc, g.fullEvery <= 1 || g.steps%g.fullEvery == 0)
}

// smallQueue is the prompt queue's limit in random sequences: small, so
// that they fill it.
const smallQueue = 2

var policies = []parley.TurnPolicy{parley.PolicyRoundRobin, parley.PolicyFree, parley.PolicyNext}

// TestRandomCommandSequences runs many seeded random sequences. After every
// decision, script.do and checkInvariants check: seqs dense from 1, events
// following the state's last seq, one open turn whose messages and traces
// are written only by its owner and delegates, message turns never going
// down, closed staying closed with nothing accepted after it but replays,
// the log folding to the state from the Create state, the JSON round trip,
// and Head and Guidance (never a panic, turn always 1 or more).
func TestRandomCommandSequences(t *testing.T) {
	t.Parallel()
	seeds, steps := 240, 160
	if testing.Short() || raceEnabled {
		seeds = 48
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, seed*7919+1))
			sc := newScript(t, policies[seed%3], agents[:3+seed%2]...)
			sc.env.Limits = randomLimits(seed)
			sc.env.Limits.MaxQueuedPrompts = smallQueue
			g := &gen{sc: sc, next: rng.IntN}
			for range steps {
				g.step()
			}
		})
	}
}

// TestRandomSequencesReachEveryRule makes sure the random sequences are not
// vacuous: across the seeds, every kind of event is written and every kind
// of refusal happens.
func TestRandomSequencesReachEveryRule(t *testing.T) {
	t.Parallel()
	events, codes := map[string]int{}, map[string]int{}
	replays, closed, full, skipped := 0, 0, 0, 0
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, seed*7919+1))
		sc := newScript(t, policies[seed%3], agents[:3+seed%2]...)
		sc.env.Limits = randomLimits(seed)
		sc.env.Limits.MaxQueuedPrompts = smallQueue
		g := &gen{sc: sc, next: rng.IntN}
		for range 160 {
			cmd := g.command()
			if cmd == nil {
				continue
			}
			d, err := sc.do(cmd)
			codes[parley.ErrorCode(err)]++
			if d.Replay != nil {
				replays++
			}
			var e *parley.Error
			if errors.As(err, &e) && e.Details["queueLength"] == smallQueue {
				full++
			}
			if d.Task != nil && len(d.Events) == 0 {
				skipped++ // a task's firing, while the queue was full
			}
			for _, e := range d.Events {
				events[e.Type]++
			}
		}
		if sc.s.Closed {
			closed++
		}
	}
	for _, typ := range []string{parley.EventMessage, parley.EventTrace, parley.EventTurnClaimed, parley.EventClaimExpired, parley.EventTurnReset,
		parley.EventTurnAborted, parley.EventDelegation, parley.EventChunk, parley.EventPartUpdated, parley.EventMessageUpdated, parley.EventMessagesRemoved,
		parley.EventPromptQueued, parley.EventPromptDispatched, parley.EventPromptAborted, parley.EventPromptCanceled, parley.EventPromptCompleted,
		conv.EventTaskRun} {
		if events[typ] == 0 {
			t.Errorf("no %s event in any sequence", typ)
		}
	}
	for _, code := range []string{"", parley.ETURNCONFLICT, parley.EPRECONDITION, parley.ECLAIMCONFLICT, parley.ECLOSED, parley.EBUSY,
		parley.EINVALIDTHREAD, parley.EIDEMPOTENCY, parley.EINVALIDVALUE, parley.EINVALID, parley.EFORBIDDEN, parley.ETOOLARGE} {
		if codes[code] == 0 {
			t.Errorf("no decision with code %q in any sequence", code)
		}
	}
	if replays == 0 || closed == 0 || full == 0 || skipped == 0 {
		t.Errorf("%d replays, %d closed conversations, %d prompts refused and %d task firings skipped for a full queue", replays, closed, full, skipped)
	}
	t.Logf("events %v\ncodes %v\nreplays %d, closed %d of 120", events, codes, replays, closed)
}
