package reads

import (
	"context"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Messages returns a page of a conversation's messages
// (store.Reader.ListMessages), those streaming assembled.
func (r *Reader) Messages(ctx context.Context, p store.ListMessagesParams) ([]*parley.Message, error) {
	ms, err := r.st.ListMessages(ctx, p)
	if err == nil {
		err = r.assemble(ctx, p.ConversationID, ms)
	}
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Replies returns a page of the direct replies to a message
// (store.Store.ListReplies), those streaming assembled. It returns
// ENOTFOUND for an unknown message.
func (r *Reader) Replies(ctx context.Context, p store.ListRepliesParams) ([]*parley.Message, error) {
	if _, err := r.st.MessageKey(ctx, p.ConversationID, p.MessageID); err != nil { // not its row
		return nil, err
	}
	ms, err := r.st.ListReplies(ctx, p)
	if err == nil {
		err = r.assemble(ctx, p.ConversationID, ms)
	}
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Message returns a message as readers should see it: one streaming
// assembled from its row and the chunks after it, any other as stored.
// It returns ENOTFOUND.
func (r *Reader) Message(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	m, err := r.st.GetMessage(ctx, conversationID, messageID)
	if err != nil {
		return nil, err
	}
	ms := []*parley.Message{m}
	if err := r.assemble(ctx, conversationID, ms); err != nil {
		return nil, err
	}
	return ms[0], nil
}

// StreamingOf returns the streaming messages of agentID in a
// conversation, assembled so far, oldest first. It returns ENOTFOUND for
// an unknown conversation.
func (r *Reader) StreamingOf(ctx context.Context, conversationID, agentID string) ([]*parley.Message, error) {
	return r.streams.Streaming(ctx, conversationID, func(_, agent string) bool { return agent == agentID })
}

// assemble makes messages read from the store show what readers should
// see: each that was streaming when it was read is replaced by its
// assembly (or, if it has ended since, by its row as it is now), so that
// no message is ever shown behind its own chunks. ms is changed in place.
func (r *Reader) assemble(ctx context.Context, conversationID string, ms []*parley.Message) error {
	streaming := map[string]bool{}
	for _, m := range ms {
		if m.Status == parley.StatusStreaming {
			streaming[m.ID] = true
		}
	}
	if len(streaming) == 0 {
		return nil
	}
	// Asked after the rows were read: the state it reads is no older, so
	// a message it does not find streaming has ended.
	live, err := r.streams.Streaming(ctx, conversationID, func(id, _ string) bool { return streaming[id] })
	if err != nil {
		return err
	}
	for i, m := range ms {
		if m.Status != parley.StatusStreaming {
			continue
		}
		if j := slices.IndexFunc(live, func(a *parley.Message) bool { return a.ID == m.ID }); j >= 0 {
			ms[i] = live[j]
			continue
		}
		now, err := r.st.GetMessage(ctx, conversationID, m.ID)
		switch parley.ErrorCode(err) {
		case "":
			ms[i] = now
		case parley.ENOTFOUND: // reverted since: the row read is all there is
		default:
			return err
		}
	}
	return nil
}
