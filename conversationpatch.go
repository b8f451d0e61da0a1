package parley

import "encoding/json"

// ConversationPatch is the body of PATCH /v1/conversations/{id}: what to
// change of a conversation after it was made. Every field is optional;
// at least one is given. What a conversation is made with besides these
// (its id, turn policy, message format, turn lease) never changes.
type ConversationPatch struct {
	// Title, if set, replaces the title ("" removes it).
	Title *string `json:"title,omitempty"`
	// Metadata, if set, is a JSON merge patch (RFC 7396) of the
	// conversation's metadata: a key set to null is removed, an object
	// merges into the object it names, anything else replaces. null
	// removes all of it.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Participants adds and removes participants: the agents the turn
	// policy takes turns among.
	Participants *NameChanges `json:"participants,omitempty"`
	// Members adds and removes members: agents that take part but whom the
	// turn policy never names. A member removed (who is not the owner nor a
	// participant) loses access: its streams of the conversation end.
	Members *NameChanges `json:"members,omitempty"`
}

// Empty reports whether the patch names nothing to change.
func (p ConversationPatch) Empty() bool {
	return p.Title == nil && p.Metadata == nil && p.Participants == nil && p.Members == nil
}

// NameChanges are agent ids to add to a list and to remove from it. Adding
// one already there or removing one absent changes nothing.
type NameChanges struct {
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// ConversationUpdate is the data of a conversation.updated event: what the
// conversation's changeable fields are after the change, whole, and who
// changed them. Metadata is null when there is none.
type ConversationUpdate struct {
	Title        string          `json:"title"`
	Metadata     json.RawMessage `json:"metadata"`
	Participants []string        `json:"participants"`
	Members      []string        `json:"members"`
	// UpdatedBy is the agent that made the change: the conversation's
	// owner, or the agent an admin token names (else "admin").
	UpdatedBy string `json:"updatedBy"`
}

// Apply returns c with the update's fields: what folding a
// conversation.updated event into a conversation's record does.
func (u ConversationUpdate) Apply(c Conversation) Conversation {
	c.Title = u.Title
	c.Metadata = nil
	if len(u.Metadata) > 0 && string(u.Metadata) != "null" {
		c.Metadata = append(json.RawMessage(nil), u.Metadata...)
	}
	c.Participants = append([]string{}, u.Participants...)
	c.Members = nil
	if len(u.Members) > 0 {
		c.Members = append([]string(nil), u.Members...)
	}
	return c
}
