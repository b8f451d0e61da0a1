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

// EndedPrompt is how a prompt ended, as the state remembers it.
type EndedPrompt struct {
	ID      string `json:"id"`
	AgentID string `json:"agentId"`
	// State is parley.PromptStateCompleted or parley.PromptStateCanceled;
	// Reason says why it was canceled.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Runner is the agent that answered it, if it was dispatched.
	Runner string `json:"runner,omitempty"`
	// TurnID is its exchange when that is not its own id (a task run's).
	TurnID string      `json:"turnId,omitempty"`
	Seq    int64       `json:"seq"`
	At     parley.Time `json:"at"`
}

// PromptStatus returns the status of prompt id, and false if the state
// knows no such prompt (never queued, or ended before the last
// MaxEndedPrompts). explained is the state's queue as Explain gives it,
// each waiting prompt saying what it waits for.
func (s State) PromptStatus(id string, explained []parley.QueuedPrompt) (*parley.PromptStatus, bool) {
	for i := range explained {
		p := &explained[i]
		if p.ID != id {
			continue
		}
		pos, q := i, *p
		st := &parley.PromptStatus{ID: id, State: parley.PromptStateQueued, AgentID: p.AgentID, Position: &pos, Runner: p.Runner, Aborted: p.Aborted,
			WaitingOn: p.WaitingOn, Queued: &q, TurnID: p.Exchange(), LastSeq: s.LastSeq}
		if p.Runner != "" {
			st.State = parley.PromptStateDispatched
		}
		return st, true
	}
	for i := len(s.Ended) - 1; i >= 0; i-- {
		if e := s.Ended[i]; e.ID == id {
			return &parley.PromptStatus{ID: id, State: e.State, AgentID: e.AgentID, Runner: e.Runner, Reason: e.Reason,
				EndedSeq: e.Seq, EndedAt: e.At, TurnID: cmp.Or(e.TurnID, id), LastSeq: s.LastSeq}, true
		}
	}
	return nil, false
}

// rememberEnded adds the prompt q, ended by event e, to the prompts the
// state remembers, dropping the oldest past MaxEndedPrompts.
func rememberEnded(ended []EndedPrompt, q parley.QueuedPrompt, e parley.Event, reason string) []EndedPrompt {
	st := parley.PromptStateCompleted
	if e.Type == parley.EventPromptCanceled {
		st = parley.PromptStateCanceled
	}
	n := EndedPrompt{ID: q.ID, AgentID: q.AgentID, State: st, Reason: reason, Runner: q.Runner, TurnID: q.TurnID, Seq: e.Seq, At: e.Time}
	if len(ended) >= MaxEndedPrompts {
		ended = ended[len(ended)-MaxEndedPrompts+1:]
	}
	out := make([]EndedPrompt, 0, len(ended)+1)
	return append(append(out, ended...), n)
}
