package conv

import (
	"cmp"
	"slices"
	"time"

	"github.com/parleyhq/parley"
)

// A prompt's status: where it stands in the queue and what it waits on,
// who answers it, or how it ended. The state keeps the last MaxEndedPrompts
// prompts that ended (State.Ended), so that whoever asked can learn how its
// prompt ended, on any node, without reading the log. They are few: unlike
// the queue, they are part of the snapshot every append rewrites (about
// 150 bytes each).

// MaxEndedPrompts is how many ended prompts a conversation's state
// remembers, newest last.
const MaxEndedPrompts = 16

// Prompt states (PromptStatus.State).
const (
	PromptQueued     = "queued"     // waiting in the queue (see WaitingOn)
	PromptDispatched = "dispatched" // handed to a runner, which has not written its answer yet
	PromptAnswering  = "answering"  // its runner writes its answer (MessageID)
	PromptCompleted  = "completed"  // answered
	PromptCanceled   = "canceled"   // ended without an answer, or with an aborted one (Reason)
)

// What a waiting prompt waits on (PromptWait.Kind).
const (
	WaitPrompt   = "prompt"   // another prompt: being answered, or ahead in line
	WaitCollect  = "collect"  // its collect window (Until)
	WaitRunner   = "runner"   // no runner is attached that may answer it (AgentID: the one it is addressed to)
	WaitTurn     = "turn"     // an open turn of another agent (AgentID)
	WaitClaim    = "claim"    // a claim on the next turn (AgentID, Until)
	WaitClosed   = "closed"   // the conversation is closed: it is never dispatched
	WaitDispatch = "dispatch" // nothing: a runner takes it next
)

// EndedPrompt is how a prompt ended, as the state remembers it.
type EndedPrompt struct {
	ID      string `json:"id"`
	AgentID string `json:"agentId"`
	// State is PromptCompleted or PromptCanceled; Reason says why it was
	// canceled.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Runner is the agent that answered it, if it was dispatched.
	Runner string `json:"runner,omitempty"`
	// TurnID is its exchange when that is not its own id (a task run's).
	TurnID string      `json:"turnId,omitempty"`
	Seq    int64       `json:"seq"`
	At     parley.Time `json:"at"`
}

// PromptWait says what a waiting prompt waits on.
type PromptWait struct {
	Kind     string      `json:"kind"`
	AgentID  string      `json:"agentId,omitempty"`
	PromptID string      `json:"promptId,omitempty"`
	Until    parley.Time `json:"until,omitzero"`
}

// PromptStatus is where a prompt stands.
type PromptStatus struct {
	ID string `json:"id"`
	// State is one of PromptQueued, PromptDispatched, PromptAnswering,
	// PromptCompleted, PromptCanceled.
	State string `json:"state"`
	// AgentID asked it.
	AgentID string `json:"agentId"`
	// Position is its place in the queue (0: first), while it is in it.
	Position *int `json:"position,omitempty"`
	// WaitingOn says what a queued prompt waits on.
	WaitingOn *PromptWait `json:"waitingOn,omitempty"`
	// Runner is the agent it was dispatched to.
	Runner string `json:"runner,omitempty"`
	// MessageID is its answer: the newest message of Runner in its
	// exchange (the engine fills it in).
	MessageID string `json:"messageId,omitempty"`
	// Aborted is set on a prompt being answered once it was stopped: it
	// ends when its runner answers or leaves.
	Aborted bool `json:"aborted,omitempty"`
	// Reason says why it was canceled.
	Reason string `json:"reason,omitempty"`
	// EndedSeq and EndedAt are the seq and time of the event that ended it.
	EndedSeq int64       `json:"endedSeq,omitempty"`
	EndedAt  parley.Time `json:"endedAt,omitzero"`
	// Queued is the prompt as the queue holds it, while it is in it.
	Queued *QueuedPrompt `json:"queued,omitempty"`
	// TurnID is its exchange: the turnId of its message and its answer.
	TurnID string `json:"turnId"`
	// LastSeq is the conversation's last seq as of this status.
	LastSeq int64 `json:"lastSeq"`
}

// Ended reports whether the prompt has ended (completed or canceled).
func (p *PromptStatus) Ended() bool {
	return p.State == PromptCompleted || p.State == PromptCanceled
}

// PromptStatus returns the status of prompt id, and false if the state
// knows no such prompt (never queued, or ended before the last
// MaxEndedPrompts). runners are the agents with a runner attached, sorted.
func (s State) PromptStatus(id string, runners []string, now time.Time) (*PromptStatus, bool) {
	for i := range s.Queue {
		p := &s.Queue[i]
		if p.ID != id {
			continue
		}
		pos, q := i, *p
		st := &PromptStatus{ID: id, State: PromptQueued, AgentID: p.AgentID, Position: &pos, Runner: p.Runner, Aborted: p.Aborted,
			Queued: &q, TurnID: p.Exchange(), LastSeq: s.LastSeq}
		if p.Runner != "" {
			st.State = PromptDispatched
		} else {
			st.WaitingOn = s.waitingOn(p, runners, now)
		}
		return st, true
	}
	for i := len(s.Ended) - 1; i >= 0; i-- {
		if e := s.Ended[i]; e.ID == id {
			return &PromptStatus{ID: id, State: e.State, AgentID: e.AgentID, Runner: e.Runner, Reason: e.Reason,
				EndedSeq: e.Seq, EndedAt: e.At, TurnID: cmp.Or(e.TurnID, id), LastSeq: s.LastSeq}, true
		}
	}
	return nil, false
}

// waitingOn says what the waiting prompt p waits on, in the order the
// dispatcher looks: the conversation, the prompts before it, its collect
// window, a runner that may answer it, the floor.
func (s State) waitingOn(p *QueuedPrompt, runners []string, now time.Time) *PromptWait {
	if s.Closed {
		return &PromptWait{Kind: WaitClosed}
	}
	if a := s.Active(); a != nil {
		return &PromptWait{Kind: WaitPrompt, PromptID: a.ID, AgentID: a.Runner}
	}
	// The runners that may answer it, and whether one would be handed
	// another prompt first.
	var able []string
	for _, r := range runners {
		if p.To != "" && p.To != r {
			continue
		}
		able = append(able, r)
		if n := s.NextPrompt(r, now); n != nil && n.ID != p.ID {
			return &PromptWait{Kind: WaitPrompt, PromptID: n.ID}
		}
	}
	if p.Mode == ModeCollect && now.Before(p.Until.Time) {
		return &PromptWait{Kind: WaitCollect, Until: p.Until}
	}
	if len(able) == 0 {
		return &PromptWait{Kind: WaitRunner, AgentID: p.To}
	}
	if s.Open != nil && !slices.Contains(able, s.Open.Owner) {
		return &PromptWait{Kind: WaitTurn, AgentID: s.Open.Owner}
	}
	if c := s.activeClaim(now); c != nil && !slices.Contains(able, c.AgentID) {
		return &PromptWait{Kind: WaitClaim, AgentID: c.AgentID, Until: c.ExpiresAt}
	}
	return &PromptWait{Kind: WaitDispatch}
}

// rememberEnded adds the prompt q, ended by event e, to the prompts the
// state remembers, dropping the oldest past MaxEndedPrompts.
func rememberEnded(ended []EndedPrompt, q QueuedPrompt, e parley.Event, reason string) []EndedPrompt {
	st := PromptCompleted
	if e.Type == EventPromptCanceled {
		st = PromptCanceled
	}
	n := EndedPrompt{ID: q.ID, AgentID: q.AgentID, State: st, Reason: reason, Runner: q.Runner, TurnID: q.TurnID, Seq: e.Seq, At: e.Time}
	if len(ended) >= MaxEndedPrompts {
		ended = ended[len(ended)-MaxEndedPrompts+1:]
	}
	out := make([]EndedPrompt, 0, len(ended)+1)
	return append(append(out, ended...), n)
}
