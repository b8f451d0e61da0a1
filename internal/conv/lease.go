package conv

import (
	"slices"
	"time"

	"github.com/parleyhq/parley"
)

// Turn leases: an open turn whose owner has no runner attached and into
// which nothing has been written for the conversation's turn lease ends
// with a turn.aborted tombstone whose reason is ReasonTimeout, written as
// any abort is, so that it streams, exports and imports like one. The floor
// is then free, and the prompts that waited for it are dispatched.

// ReasonTimeout is the reason of the turn.aborted tombstone of a turn whose
// lease ended.
const ReasonTimeout = "timeout"

// The bounds of a turn lease, the server's and a conversation's.
const (
	MinTurnLease     = time.Second
	MaxTurnLease     = 24 * time.Hour
	DefaultTurnLease = 2 * time.Minute
)

// CheckTurnLease refuses a turn lease outside MinTurnLease to MaxTurnLease.
func CheckTurnLease(d time.Duration) error {
	if d < MinTurnLease || d > MaxTurnLease {
		return parley.Errorf(parley.EINVALIDVALUE, "a turn lease is from %s to %s, not %s", MinTurnLease, MaxTurnLease, d)
	}
	return nil
}

// TurnLease is the conversation's turn lease: its own (turnLeaseMs), else
// def (the server's).
func (s State) TurnLease(def time.Duration) time.Duration {
	if ms := s.Conversation.TurnLeaseMs; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return def
}

// TurnLapse is when the open turn's lease ends, counted from the later of
// the last write into it and since (when its owner was last seen with a
// runner attached); zero if no turn is open.
func (s State) TurnLapse(lease time.Duration, since time.Time) time.Time {
	if s.Open == nil {
		return time.Time{}
	}
	from := s.OpenActiveAt.Time
	if from.IsZero() {
		from = s.LastAt.Time // a state stored before turns had leases
	}
	if since.After(from) {
		from = since
	}
	return from.Add(lease)
}

// ExpireTurn ends the open turn with a turn.aborted tombstone (reason
// ReasonTimeout) if its lease has ended at Env.Now: its owner is not one of
// Runners (the agents with a runner attached, on any node) and nothing was
// written into it for Lease since the later of its last write and Since.
// Otherwise it writes nothing.
type ExpireTurn struct {
	Lease   time.Duration
	Runners []string
	Since   time.Time
}

func (c ExpireTurn) decide(d *decider) error { return d.expireTurn(c) }

func (d *decider) expireTurn(c ExpireTurn) error {
	open := d.s.Open
	if d.s.Closed || open == nil || slices.Contains(c.Runners, open.Owner) || c.Lease <= 0 ||
		d.env.Now.Before(d.s.TurnLapse(c.Lease, c.Since)) {
		return nil
	}
	d.cancelInputs(nil, open.Owner, open.Turn, nil, "", ReasonTimeout)
	e := d.emit(parley.EventTurnAborted, open.Turn, open.TurnID, open.Owner, parley.FinalityTurn, parley.TurnRef{Turn: open.Turn, Reason: ReasonTimeout})
	d.out.Result = Result{Turn: open.Turn, Seq: e.Seq}
	return nil
}

// Reasons a waiting prompt gives (WaitingOn.Reason).
const (
	WaitTurn    = "turn"    // another agent's open turn
	WaitClaim   = "claim"   // another agent's claim on the next turn
	WaitPrompt  = "prompt"  // the prompt being answered
	WaitQueue   = "queue"   // a prompt ahead of it
	WaitRunner  = "runner"  // a runner of the agent it is for (of any agent when it names none)
	WaitCollect = "collect" // a collect prompt's window
)

// Explain returns a copy of the queue in which every waiting prompt says
// what it waits for (WaitingOn), as the dispatcher sees it at now: runners
// are the agents with a runner attached, sorted; lease is the open turn's
// lease and since when its owner was last seen with a runner (see
// TurnLapse).
func (s State) Explain(runners []string, now time.Time, lease time.Duration, since time.Time) []parley.QueuedPrompt {
	if len(s.Queue) == 0 {
		return nil
	}
	q := slices.Clone(s.Queue)
	for i := range q {
		if q[i].Runner == "" && !s.Closed {
			q[i].WaitingOn = s.waitingOn(q[i], runners, now, lease, since)
		}
	}
	return q
}

// waitingOn says what the waiting prompt p waits for, or nil if the
// dispatcher would hand it out now.
func (s State) waitingOn(p parley.QueuedPrompt, runners []string, now time.Time, lease time.Duration, since time.Time) *parley.WaitingOn {
	if a := s.Active(); a != nil {
		return &parley.WaitingOn{Reason: WaitPrompt, AgentID: a.Runner, PromptID: a.ID}
	}
	var first *parley.WaitingOn
	for _, r := range runners {
		if p.To != "" && p.To != r {
			continue
		}
		w := s.waitingFor(p, r, runners, now, lease, since)
		if w == nil {
			return nil
		}
		if first == nil {
			first = w
		}
	}
	if first == nil {
		return &parley.WaitingOn{Reason: WaitRunner, AgentID: p.To}
	}
	return first
}

// waitingFor says what keeps p from runner r, or nil if nothing does.
func (s State) waitingFor(p parley.QueuedPrompt, r string, runners []string, now time.Time, lease time.Duration, since time.Time) *parley.WaitingOn {
	next := s.NextPrompt(r, now)
	if next == nil { // the prompt at the head collects still
		for _, h := range s.Queue {
			if h.To == "" || h.To == r {
				until := h.Until
				return &parley.WaitingOn{Reason: WaitCollect, PromptID: h.ID, Until: &until}
			}
		}
		return &parley.WaitingOn{Reason: WaitRunner, AgentID: p.To}
	}
	if next.ID != p.ID {
		return &parley.WaitingOn{Reason: WaitQueue, PromptID: next.ID}
	}
	if !floorFree(s, r, p.AgentID) {
		w := &parley.WaitingOn{Reason: WaitTurn, AgentID: s.Open.Owner, Turn: s.Open.Turn, TurnID: s.Open.TurnID}
		if lease > 0 && !slices.Contains(runners, s.Open.Owner) {
			until := parley.NewTime(s.TurnLapse(lease, since))
			w.Until = &until
		}
		return w
	}
	if c := s.activeClaim(now); c != nil && s.Open == nil && c.Turn == s.LastTurn+1 && c.AgentID != p.AgentID {
		until := c.ExpiresAt
		return &parley.WaitingOn{Reason: WaitClaim, AgentID: c.AgentID, Turn: c.Turn, Until: &until}
	}
	return nil
}
