package engine

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// UpdateConversation changes a conversation's title, metadata,
// participants or members (conv.UpdateConversation): a
// conversation.updated event, written with the conversation's stored
// record and the agents it is listed for. A patch that changes nothing
// writes nothing; either way it returns the conversation's view. An agent
// it removes loses access at once: its streams of the conversation and
// its runners there end.
func (e *Engine) UpdateConversation(ctx context.Context, id string, c conv.UpdateConversation) (*View, error) {
	_, s, err := e.decide(ctx, id, func(conv.State) (conv.Command, error) { return c, nil }, nil)
	if err != nil {
		return nil, err
	}
	return e.view(s), nil
}

// conversationChange is the record an append of events, which leave the
// state next, writes for its conversation: nil unless one of them is a
// conversation.updated event.
func conversationChange(next conv.State, events []parley.Event) *store.ConversationChange {
	for _, ev := range events {
		if ev.Type == parley.EventConversationUpdated {
			return &store.ConversationChange{Conversation: next.Conversation, Members: conv.Members(next.Conversation)}
		}
	}
	return nil
}

// reindex lists conversation c again under the agents that take part in
// it if events changed them; c.mu must be held.
func (e *Engine) reindex(id string, c *conversation, events []parley.Event) {
	for _, ev := range events {
		if ev.Type == parley.EventConversationUpdated {
			e.cache.index(id, c)
			return
		}
	}
}
