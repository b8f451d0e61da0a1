package conv

import (
	"maps"

	"github.com/parleyhq/parley"
)

// The first runner protocol. A conversation made with messageFormat "v1"
// also takes the frames of the protocol runners spoke before messages had
// parts: text streamed as it comes (StreamV1), then one complete row per
// text segment (a result), tool calls as rows of their own, and complete.
// Package dispatch turns the rows and complete into the ordinary commands;
// the streamed text alone needs a rule of its own.

// StreamV1 is text an agent streams in a v1 conversation before the row
// that holds it: a chunk event that names no message (clients show it
// until the agent's next message, which holds the text). It takes the
// floor as a message would (the agent's open turn, or the next one,
// answering the prompt dispatched to it) and closes nothing. Empty text is
// accepted and writes nothing. The texts no message holds yet are bounded
// as one message's text is (Limits.MaxTextBytes, all agents' together,
// and at most Limits.MaxStreaming agents at once), so that a snapshot,
// which carries them, stays bounded.
type StreamV1 struct {
	Actor
	Content string
}

func (c StreamV1) decide(d *decider) error { return d.streamV1(c) }

func (d *decider) streamV1(c StreamV1) error {
	if f := d.s.Conversation.MessageFormat; f != "v1" {
		return parley.Errorf(parley.EINVALIDVALUE, "stream, result and tool frames are for conversations made with messageFormat v1; this one is %s (message.create, message.part.text-delta, …)", f)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	if err := v1Room(d.s, c.AgentID, len(c.Content), d.env.Limits); err != nil {
		if pe := err.(*parley.Error); pe.Code == parley.EBUSY {
			return pe.WithHead(d.base.Head(d.env.Now))
		}
		return err
	}
	plan, err := d.planTurn(c.AgentID, nil)
	if err != nil {
		return err
	}
	if c.Content == "" {
		d.out.Result = Result{Turn: plan.turn, Claimed: true}
		return nil
	}
	explicit, known := "", Lookups{}
	if a := d.s.Active(); a != nil && a.Runner == c.AgentID {
		explicit, known.TurnIDKnown = a.TurnID, true // the exchange of the prompt it answers
		if explicit == "" {
			explicit = a.ID
		}
	}
	turnID, err := d.turnIDFor(plan, "", parley.RoleAssistant, explicit, known)
	if err != nil {
		return err
	}
	e := d.emit(parley.EventChunk, plan.turn, turnID, c.AgentID, parley.FinalityNone, parley.Chunk{Content: c.Content})
	d.out.Result = Result{Turn: plan.turn, Claimed: true, Seq: e.Seq}
	return nil
}

// v1Room checks that agent may stream n more bytes of text that no message
// holds yet: ETOOLARGE past MaxTextBytes of such text in all, EBUSY (with
// no head) when MaxStreaming other agents stream such text already.
func v1Room(s State, agent string, n int, l Limits) error {
	pending := 0
	for _, t := range s.Texts {
		pending += t.Bytes
	}
	if pending+n > l.MaxTextBytes {
		return parley.Errorf(parley.ETOOLARGE, "streamed text of %d bytes, after %d streamed that no result holds yet; the limit is %d (send a result to hold what was streamed)",
			n, pending, l.MaxTextBytes)
	}
	if _, ok := s.Texts[agent]; !ok && n > 0 && len(s.Texts) >= l.MaxStreaming {
		return parley.Errorf(parley.EBUSY, "%d agents stream text that no result holds yet, the most there may be at once; wait until one sends its result", len(s.Texts)).
			With("maxStreaming", l.MaxStreaming)
	}
	return nil
}

// PendingText is what the rules keep of the text an agent streams in a v1
// conversation that no message holds yet: the seq of its first chunk, and
// the bytes of text it holds. The text itself is in the log (the agent's
// chunk events from Seq on that name no message), where a snapshot reads
// it.
type PendingText struct {
	Seq   int64 `json:"seq"`
	Bytes int   `json:"bytes"`
}

// growText adds a chunk that names no message to its agent's text, or
// starts it.
func growText(s State, e parley.Event, bytes int) State {
	t, ok := s.Texts[e.AgentID]
	if !ok {
		t.Seq = e.Seq
	}
	t.Bytes += bytes
	s.Texts = maps.Clone(s.Texts)
	if s.Texts == nil {
		s.Texts = map[string]PendingText{}
	}
	s.Texts[e.AgentID] = t
	return s
}

// endTexts drops the texts that event e ends, by the rules clients fold
// them with (rule 9 of the stream's fold): an agent's text ends at its
// next message (the row that holds it), at a message or message.updated
// of its that closes its turn, at its turn.reset or turn.aborted, and when
// the prompt it answers ends (its prompt.completed, prompt.canceled or
// prompt.requeued); every text ends at a message that closes the
// conversation and at messages.removed. m is the head of a message or
// message.updated event.
func endTexts(s State, e parley.Event, m messageHead) State {
	agent := ""
	switch e.Type {
	case parley.EventMessage, parley.EventMessageUpdated:
		switch {
		case m.Finality == parley.FinalityConversation:
			s.Texts = nil
		case e.Type == parley.EventMessage || m.Finality == parley.FinalityTurn:
			agent = m.AgentID
		}
	case parley.EventMessagesRemoved:
		s.Texts = nil
	case parley.EventTurnReset, parley.EventTurnAborted, parley.EventPromptCompleted, parley.EventPromptCanceled, parley.EventPromptRequeued:
		agent = e.AgentID
	}
	if _, ok := s.Texts[agent]; ok {
		s.Texts = maps.Clone(s.Texts)
		delete(s.Texts, agent)
		if len(s.Texts) == 0 {
			s.Texts = nil
		}
	}
	return s
}
