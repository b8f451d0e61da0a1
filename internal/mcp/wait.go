package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/transport"
)

// Bounds of the tools that wait.
const (
	defaultTurnWait = 30
	defaultAskWait  = 60
	maxWait         = 120
)

// WaitForTurnInput are wait_for_turn's arguments.
type WaitForTurnInput struct {
	ConversationID string `json:"conversationId" jsonschema:"the conversation's id"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"with an admin token: the agent whose turn to wait for (an agent token waits for its own)"`
	After          int64  `json:"after,omitempty" jsonschema:"your position: the answer holds the messages after this seq"`
	Limit          int    `json:"limit,omitempty" jsonschema:"how many messages at most, 1 to 200 (default 50)"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait, 1 to 120 seconds (default 30)"`
}

// waitForTurn holds the call until the conversation's guidance names the
// agent, the conversation closes or the wait passes, following the
// conversation's live feed (as its streams do), then answers with the
// messages after the agent's position.
func (s *Server) waitForTurn(ctx context.Context, who parley.Identity, in *WaitForTurnInput) (*ConversationOutput, error) {
	act, err := s.writer(who, in.AgentID, in.ConversationID)
	if err != nil {
		return nil, err
	}
	limit, err := bounded("limit", in.Limit, defaultMessages, maxMessages)
	if err != nil {
		return nil, err
	}
	secs, err := bounded("timeoutSeconds", in.TimeoutSeconds, defaultTurnWait, maxWait)
	if err != nil {
		return nil, err
	}
	if in.After < 0 {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "after must be a seq, 0 or more, not %d", in.After)
	}
	id := in.ConversationID
	var from parley.Position // where the wait follows the conversation from
	if err := s.eng.Require(ctx, id, func(st conv.State) error {
		from = parley.Position{Seq: st.LastSeq, Epoch: st.Conversation.Epoch}
		return st.CanWrite(act)
	}); err != nil {
		return nil, err
	}
	ctx, release, err := s.hold(ctx, who, id)
	if err != nil {
		return nil, err
	}
	defer release()
	mine, err := s.awaitTurn(ctx, id, act.AgentID, from, time.Duration(secs)*time.Second)
	if err != nil {
		return nil, transport.CutOff(ctx, err)
	}
	out, err := s.page(ctx, id, in.After, limit)
	if err != nil {
		return nil, err
	}
	// The guidance read with the page is the newer: it decides.
	mine = names(out.Guidance, act.AgentID)
	out.YourTurn = &mine
	out.TimedOut = !mine && !out.Head.Closed
	return out, nil
}

// names reports whether guidance g names agent.
func names(g *parley.Guidance, agent string) bool {
	return g != nil && g.NextAgentID == agent &&
		(g.Kind == parley.GuidanceStartTurn || g.Kind == parley.GuidanceContinueTurn)
}

// hold counts a wait of who on conversation id among the token's
// connections (Options.MaxConnsPerToken), as a waiting GET …/prompts/{pid}
// is: revoking the token, or who losing the right to read, ends it.
func (s *Server) hold(ctx context.Context, who parley.Identity, id string) (context.Context, func(), error) {
	ctx, cut := context.WithCancelCause(ctx)
	release, err := s.eng.ConnectReader(ctx, who, s.opts.MaxConnsPerToken, id, cut)
	if err != nil {
		cut(nil)
		return nil, nil, err
	}
	return ctx, func() { release(); cut(nil) }, nil
}

// awaitTurn follows conversation id from position from (a recent one: the
// follower replays what came after it, and takes no snapshot) until its
// guidance names agent (true), it closes, or wait passes (false). The
// follower's start holds the guidance and head as of joining: the turn may
// be the agent's already.
func (s *Server) awaitTurn(ctx context.Context, id, agent string, from parley.Position, wait time.Duration) (bool, error) {
	f, err := s.eng.Follow(ctx, id, &from)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if names(f.Init.Guidance, agent) || f.Init.Head.Closed {
		return names(f.Init.Guidance, agent), nil
	}
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		it, err := f.Next(ctx, left)
		switch {
		case errors.Is(err, feed.ErrIdle):
			return false, nil
		case err != nil:
			return false, err
		case it.Guidance != nil && names(it.Guidance, agent):
			return true, nil
		case it.Event != nil && it.Event.Finality == parley.FinalityConversation:
			return false, nil
		}
	}
}

// AskAgentInput are ask_agent's arguments.
type AskAgentInput struct {
	ConversationID string `json:"conversationId" jsonschema:"the conversation's id"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"with an admin token: the agent who asks"`
	To             string `json:"to" jsonschema:"the agent to ask (its runner answers)"`
	Content        string `json:"content" jsonschema:"the question"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait for the answer, 1 to 120 seconds (default 60)"`
	PromptID       string `json:"promptId,omitempty" jsonschema:"an id of your choosing for the prompt: asking again with the same promptId (after a timeout or a lost connection) waits for the prompt you asked before instead of asking twice"`
}

// AskAgentOutput is ask_agent's answer.
type AskAgentOutput struct {
	PromptID string `json:"promptId"`
	// State is the prompt's: completed once answered; queued, dispatched
	// or answering while it waits; canceled when it ended unanswered.
	State string `json:"state"`
	// Answer is the answer's message, once completed.
	Answer *parley.Message `json:"answer,omitempty"`
	// TimedOut is true when the wait ended before the answer.
	TimedOut bool `json:"timedOut,omitempty"`
	// Reason says why a canceled prompt ended.
	Reason string `json:"reason,omitempty"`
}

// askAgent queues a prompt to another agent, as POST …/prompts does, and
// waits for its answer as GET …/prompts/{pid}?wait= does.
func (s *Server) askAgent(ctx context.Context, who parley.Identity, in *AskAgentInput) (*AskAgentOutput, error) {
	act, err := s.writer(who, in.AgentID, in.ConversationID)
	if err != nil {
		return nil, err
	}
	secs, err := bounded("timeoutSeconds", in.TimeoutSeconds, defaultAskWait, maxWait)
	if err != nil {
		return nil, err
	}
	if err := checkID("to", in.To); err != nil {
		return nil, err
	}
	id := in.ConversationID
	// Held before the prompt is queued: a token over its bound of waits
	// queues nothing.
	ctx, release, err := s.hold(ctx, who, id)
	if err != nil {
		return nil, err
	}
	defer release()
	promptID, err := s.askOnce(ctx, id, act, in)
	if err != nil {
		return nil, err
	}
	st, err := s.eng.WaitPrompt(ctx, id, promptID, time.Duration(secs)*time.Second)
	if err != nil {
		return nil, transport.CutOff(ctx, err)
	}
	out := &AskAgentOutput{PromptID: promptID, State: st.State, Reason: st.Reason, TimedOut: !st.Ended()}
	if st.State == parley.PromptStateCompleted && st.MessageID != "" {
		if out.Answer, err = s.rd.Message(ctx, id, st.MessageID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// askOnce queues ask_agent's prompt and returns its id; with a promptId the
// caller asked before, it queues nothing and returns that id, so that a
// retried ask waits for the first.
func (s *Server) askOnce(ctx context.Context, id string, act conv.Actor, in *AskAgentInput) (string, error) {
	if in.PromptID != "" {
		if err := checkID("promptId", in.PromptID); err != nil {
			return "", err
		}
		if _, asked, err := s.rd.AskedBefore(ctx, id, in.PromptID, act.AgentID); err != nil || asked {
			return in.PromptID, err
		}
	}
	res, err := s.eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: act, ID: in.PromptID, Content: in.Content, To: in.To})
	if err != nil && in.PromptID != "" {
		// The same ask sent twice at once queues it once.
		if _, asked, qerr := s.rd.AskedBefore(ctx, id, in.PromptID, act.AgentID); qerr == nil && asked {
			return in.PromptID, nil
		}
	}
	if err != nil {
		return "", err
	}
	return res.ID, nil
}
