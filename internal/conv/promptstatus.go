package conv

import (
	"cmp"

	"github.com/parleyhq/parley"
)

// A prompt's status: where it stands in the queue and what it waits for
// (State.Explain), who answers it, or how it ended. The state keeps the
// last MaxEndedPrompts prompts that ended (State.Ended), so that whoever
// asked can learn how its prompt ended, on any node, without reading the
// log. They are few: unlike the queue, they are part of the snapshot every
// append rewrites (about 150 bytes each).

// MaxEndedPrompts is how many ended prompts a conversation's state
// remembers, newest last.
const MaxEndedPrompts = 16

// Prompt states (PromptStatus.State).
const (
	PromptQueued     = "queued"     // waiting in the queue (WaitingOn says for what)
	PromptDispatched = "dispatched" // handed to a runner, which has not written its answer yet
	PromptAnswering  = "answering"  // its runner writes its answer (MessageID)
	PromptCompleted  = "completed"  // answered
	PromptCanceled   = "canceled"   // ended without an answer, or with an aborted one (Reason)
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
	// WaitingOn says what a queued prompt waits for (State.Explain); nil
	// on one about to be dispatched.
	WaitingOn *WaitingOn `json:"waitingOn,omitempty"`
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
// MaxEndedPrompts). explained is the state's queue as Explain gives it,
// each waiting prompt saying what it waits for.
func (s State) PromptStatus(id string, explained []QueuedPrompt) (*PromptStatus, bool) {
	for i := range explained {
		p := &explained[i]
		if p.ID != id {
			continue
		}
		pos, q := i, *p
		st := &PromptStatus{ID: id, State: PromptQueued, AgentID: p.AgentID, Position: &pos, Runner: p.Runner, Aborted: p.Aborted,
			WaitingOn: p.WaitingOn, Queued: &q, TurnID: p.Exchange(), LastSeq: s.LastSeq}
		if p.Runner != "" {
			st.State = PromptDispatched
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

// rememberEnded adds the prompt q, ended by event e, to the prompts the
// state remembers, dropping the oldest past MaxEndedPrompts.
func rememberEnded(ended []EndedPrompt, q QueuedPrompt, e parley.Event, reason string) []EndedPrompt {
	st := PromptCompleted
	if e.Type == parley.EventPromptCanceled {
		st = PromptCanceled
	}
	n := EndedPrompt{ID: q.ID, AgentID: q.AgentID, State: st, Reason: reason, Runner: q.Runner, TurnID: q.TurnID, Seq: e.Seq, At: e.Time}
	if len(ended) >= MaxEndedPrompts {
		ended = ended[len(ended)-MaxEndedPrompts+1:]
	}
	out := make([]EndedPrompt, 0, len(ended)+1)
	return append(append(out, ended...), n)
}
