package engine

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/store"
)

// Streaming messages (seed 001): start one with PostMessage{Streaming: true},
// then StreamText, StreamTool and FinalizeMessage. The engine keeps each
// in-progress message assembled in memory; after a restart (or on another
// node) it rebuilds it from its row and the chunk events after the row.

// StreamText appends a text delta to a streaming message. It returns the
// errors of conv.Decide and ENOTFOUND for an unknown conversation.
func (e *Engine) StreamText(ctx context.Context, conversationID string, c conv.StreamText) (*MessageResult, error) {
	return e.streamCommand(ctx, conversationID, c.MessageID, func(k conv.StreamLookups) conv.Command { c.Known = k; return c })
}

// StreamTool adds or updates a tool call of a streaming message.
func (e *Engine) StreamTool(ctx context.Context, conversationID string, c conv.StreamTool) (*MessageResult, error) {
	return e.streamCommand(ctx, conversationID, c.MessageID, func(k conv.StreamLookups) conv.Command { c.Known = k; return c })
}

// FinalizeMessage ends a streaming message.
func (e *Engine) FinalizeMessage(ctx context.Context, conversationID string, c conv.FinalizeMessage) (*MessageResult, error) {
	return e.streamCommand(ctx, conversationID, c.MessageID, func(k conv.StreamLookups) conv.Command { c.Known = k; return c })
}

func (e *Engine) streamCommand(ctx context.Context, convID, messageID string, with func(conv.StreamLookups) conv.Command) (*MessageResult, error) {
	build := func(s conv.State) (conv.Command, error) {
		m, err := e.assembled(ctx, convID, messageID, s)
		return with(conv.StreamLookups{Message: m}), err
	}
	d, _, err := e.decide(ctx, convID, build, nil)
	if err != nil {
		return nil, err
	}
	return &MessageResult{Message: d.Result.Message, Seq: d.Result.Seq, Turn: d.Result.Turn}, nil
}

// assembled returns a streaming message as assembled so far, from the cache
// or rebuilt from its row and the chunks after it; nil if it is not
// streaming. The conversation's lock must be held.
func (e *Engine) assembled(ctx context.Context, convID, id string, s conv.State) (*parley.Message, error) {
	c := e.entry(convID)
	if m, ok := c.streams[id]; ok {
		return m, nil
	}
	if _, ok := s.Streams[id]; !ok {
		return nil, nil
	}
	m, err := e.store.GetMessage(ctx, convID, id)
	if err != nil {
		return nil, err
	}
	for after := m.UpdatedSeq; after < s.LastSeq; {
		events, err := e.store.ReadEvents(ctx, store.ReadEventsParams{ConversationID: convID, After: after, Limit: historyPage})
		if err != nil {
			return nil, err
		}
		if len(events) == 0 {
			break
		}
		for _, ev := range events {
			var ch parley.Chunk
			if ev.Type == parley.EventChunk && json.Unmarshal(ev.Data, &ch) == nil && ch.MessageID == id {
				conv.AppendText(m, ch.Content)
			}
		}
		after = events[len(events)-1].Seq
	}
	c.remember(m)
	return m, nil
}

// remember keeps a streaming message's assembly, or drops it once final.
func (c *conversation) remember(m *parley.Message) {
	if m == nil {
		return
	}
	if m.Status != parley.StatusStreaming {
		delete(c.streams, m.ID)
		return
	}
	if c.streams == nil {
		c.streams = make(map[string]*parley.Message)
	}
	c.streams[m.ID] = m
}

// StreamingMessage returns a message as readers should see it: a streaming
// one assembled from its row and the chunks after it, any other as stored.
// It returns ENOTFOUND.
func (e *Engine) StreamingMessage(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	m, err := e.assembled(ctx, conversationID, messageID, c.state)
	if err != nil || m != nil {
		return m, err
	}
	return e.store.GetMessage(ctx, conversationID, messageID)
}
