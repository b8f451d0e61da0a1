package conv

import (
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

// Create validates a new conversation and returns its state and first event
// (conversation.created, seq 1, turn 0). The caller sets ID, Epoch, CreatedBy.
func Create(c parley.Conversation, env Env) (State, []parley.Event, error) {
	if env.Limits == (Limits{}) {
		env.Limits = DefaultLimits
	}
	if c.TurnPolicy == "" {
		c.TurnPolicy = parley.PolicyRoundRobin
	}
	if c.MessageFormat == "" {
		c.MessageFormat = "v2"
	}
	if c.Participants == nil {
		c.Participants = []string{}
	}
	if err := checkConversation(c, env.Limits); err != nil {
		return State{}, nil, err
	}
	c.CreatedAt = parley.NewTime(env.Now)
	d := &decider{s: State{Conversation: c}, env: env}
	d.emit(parley.EventConversationCreated, 0, "", c.CreatedBy, parley.FinalityNone, c)
	if err := checkStorable(d.out.Events); err != nil {
		return State{}, nil, err
	}
	return d.s, d.out.Events, nil
}

// checkConversation checks a conversation's settings against the rules
// and limits: those it is made with (Create) and those a change leaves it
// with (UpdateConversation, a replayed conversation.updated).
func checkConversation(c parley.Conversation, l Limits) error {
	switch {
	case !parley.ValidID(c.ID):
		return parley.Errorf(parley.EINVALIDVALUE, "conversation id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", c.ID)
	case !c.TurnPolicy.Valid():
		return parley.Errorf(parley.EINVALIDVALUE, "turnPolicy %q is not one of round-robin, free, next", c.TurnPolicy)
	case c.MessageFormat != "v1" && c.MessageFormat != "v2":
		return parley.Errorf(parley.EINVALIDVALUE, "messageFormat %q is not one of v1, v2", c.MessageFormat)
	case len(c.Participants) > l.MaxParticipants:
		return parley.Errorf(parley.ETOOLARGE, "a conversation may have at most %d participants", l.MaxParticipants)
	case len(c.Members) > l.MaxParticipants:
		return parley.Errorf(parley.ETOOLARGE, "a conversation may have at most %d members besides its participants", l.MaxParticipants)
	case len(c.Title) > 512:
		return parley.Errorf(parley.ETOOLARGE, "title is %d bytes; the limit is 512", len(c.Title))
	case len(c.Metadata) > l.MaxMetadataBytes:
		return parley.Errorf(parley.ETOOLARGE, "metadata is %d bytes; the limit is %d", len(c.Metadata), l.MaxMetadataBytes)
	case c.CreatedBy != "" && !parley.ValidID(c.CreatedBy):
		return parley.Errorf(parley.EINVALIDVALUE, "createdBy %q is not a valid agent id", c.CreatedBy)
	case len(c.Metadata) > 0 && !json.Valid(c.Metadata):
		return parley.Errorf(parley.EINVALID, "metadata is not valid JSON")
	case c.TurnLeaseMs != 0 && (c.TurnLeaseMs < MinTurnLease.Milliseconds() || c.TurnLeaseMs > MaxTurnLease.Milliseconds()):
		return parley.Errorf(parley.EINVALIDVALUE, "turnLeaseMs must be from %d (one second) to %d (one day), or left out for the server's, not %d",
			MinTurnLease.Milliseconds(), MaxTurnLease.Milliseconds(), c.TurnLeaseMs)
	}
	for i, p := range c.Participants {
		if !parley.ValidID(p) {
			return parley.Errorf(parley.EINVALIDVALUE, "participants[%d] %q is not a valid agent id", i, p)
		}
		if slices.Index(c.Participants, p) != i {
			return parley.Errorf(parley.EINVALIDVALUE, "participant %q is listed twice", p)
		}
	}
	for i, m := range c.Members {
		switch {
		case !parley.ValidID(m):
			return parley.Errorf(parley.EINVALIDVALUE, "members[%d] %q is not a valid agent id", i, m)
		case slices.Index(c.Members, m) != i:
			return parley.Errorf(parley.EINVALIDVALUE, "member %q is listed twice", m)
		case slices.Contains(c.Participants, m):
			return parley.Errorf(parley.EINVALIDVALUE, "member %q is a participant already", m)
		}
	}
	return nil
}
