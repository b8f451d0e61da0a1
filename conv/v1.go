package conv

import "github.com/parleyhq/parley"

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
// accepted and writes nothing.
type StreamV1 struct {
	Actor
	Content string
}

func (StreamV1) command() {}

func (d *decider) streamV1(c StreamV1) error {
	if f := d.s.Conversation.MessageFormat; f != "v1" {
		return parley.Errorf(parley.EINVALIDVALUE, "stream, result and tool frames are for conversations made with messageFormat v1; this one is %s (message.create, message.part.text-delta, …)", f)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	if len(c.Content) > d.env.Limits.MaxTextBytes {
		return parley.Errorf(parley.ETOOLARGE, "streamed text of %d bytes; the limit is %d", len(c.Content), d.env.Limits.MaxTextBytes)
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
