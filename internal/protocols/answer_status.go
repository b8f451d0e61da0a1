package protocols

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// The status of an answer not begun: while a chat's prompt waits with no
// runner attached that may answer it, the chat protocols say so (a
// transient data part of the AI SDK's stream, an AG-UI CUSTOM event),
// instead of leaving the client with a spinner. The status is read from
// the prompt's status (engine.PromptStatus) when the stream starts and
// whenever the conversation's guidance changes (a runner came or went).
// It is not part of the answer, and not from the log: a stream resumed
// later may say it differently, or not at all. Nothing is said while a
// runner is attached, so that a stream answered at once is as it was.

// answerStatus is what a status step carries: the prompt's state, and
// what it waits on.
type answerStatus struct {
	PromptID  string            `json:"promptId"`
	State     string            `json:"state"`
	WaitingOn *parley.WaitingOn `json:"waitingOn,omitempty"`
	Runner    string            `json:"runner,omitempty"`
}

// promptWaitsForRunner reports whether a status is of a prompt that waits
// for a runner.
func promptWaitsForRunner(st *parley.PromptStatus) bool {
	return st.State == parley.PromptStateQueued && st.WaitingOn != nil && st.WaitingOn.Reason == conv.WaitRunner
}

// statusSteps appends to out a status step for a's prompt if its status
// changed since the last one said, and it was ever waiting for a runner;
// it says nothing once the answer has begun, nor of the moment between a
// runner coming and its taking the prompt.
func (s *Server) statusSteps(ctx context.Context, id string, a *answerState, out []step) []step {
	if a.prompt == "" || a.m != nil || a.done {
		return out
	}
	st, err := s.eng.PromptStatus(ctx, id, a.prompt)
	if err != nil {
		return out // gone, or ended: the log says how
	}
	if a.status == "" && !promptWaitsForRunner(st) {
		return out
	}
	if st.State == parley.PromptStateQueued && st.WaitingOn == nil {
		return out // a runner takes it at once: "dispatched" follows
	}
	body := answerStatus{PromptID: st.ID, State: st.State, WaitingOn: st.WaitingOn, Runner: st.Runner}
	b, _ := json.Marshal(body)
	if string(b) == a.status {
		return out
	}
	a.status = string(b)
	return append(out, step{kind: stepStatus, text: a.status})
}
