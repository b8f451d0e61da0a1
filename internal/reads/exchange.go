package reads

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/store"
)

// A chat protocol's exchanges (package protocols): a question asked as a
// prompt, and its answer. These find them where the queue (conv.State) no
// longer holds them: in the conversation's messages.

// AskedBefore finds prompt id, asked by asker, in conversation convID: in
// the queue, or as its message. It returns the position its answer is to
// be followed from: after its prompt.queued event, or just before its
// message. A prompt or message of that id by another is not found: it is
// not the asker's question.
func (r *Reader) AskedBefore(ctx context.Context, convID, id, asker string) (parley.Position, bool, error) {
	var (
		from          parley.Position
		found, queued bool
	)
	err := r.streams.Require(ctx, convID, func(st conv.State) error {
		var by string
		by, from, queued = st.Asked(id)
		found = queued && by == asker
		return nil
	})
	if err != nil || queued {
		return from, found, err
	}
	m, err := r.st.MessageKey(ctx, convID, id) // its seq: not its row
	switch {
	case parley.ErrorCode(err) == parley.ENOTFOUND:
		return from, false, nil
	case err != nil:
		return from, false, err
	}
	return parley.Position{Seq: m.Seq - 1}, m.AgentID == asker, nil
}

// AnswerUnderWay is the answer a chat's client should see streaming in a
// conversation, and the position it is followed from.
type AnswerUnderWay struct {
	// PromptID is the prompt whose answer it is, if a prompt is under way
	// (conv.State.PromptUnderWay).
	PromptID string
	// MessageID is otherwise the latest answer still streaming.
	MessageID string
	From      parley.Position
}

// AnswerUnderWay finds the answer a chat's client should see streaming in
// conversation id: the answer to the prompt under way, else the latest
// message (not a user's) still streaming. It returns nil when there is
// none.
func (r *Reader) AnswerUnderWay(ctx context.Context, id string) (*AnswerUnderWay, error) {
	var (
		prompt  *parley.QueuedPrompt
		streams []string
		epoch   string
	)
	err := r.streams.Require(ctx, id, func(st conv.State) error {
		epoch = st.Conversation.Epoch
		prompt = st.PromptUnderWay()
		for mid := range st.Streams.All() {
			streams = append(streams, mid)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if prompt != nil && len(prompt.Parts) > 0 {
		return &AnswerUnderWay{PromptID: prompt.ID, From: parley.Position{Seq: prompt.Parts[0], Epoch: epoch}}, nil
	}
	var latest *parley.Message
	for _, mid := range streams {
		m, err := r.st.GetMessage(ctx, id, mid)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Role != parley.RoleUser && (latest == nil || m.Seq > latest.Seq) {
			latest = m
		}
	}
	if latest == nil {
		return nil, nil
	}
	return &AnswerUnderWay{MessageID: latest.ID, From: parley.Position{Seq: latest.Seq - 1, Epoch: epoch}}, nil
}

// ExchangeStart is the message from which a regenerate or an edit by agent
// asker removes the exchange it replaces: the message named by messageID
// (an answer: the question it answers), else the asker's latest question,
// among its last 20 messages. "" when there is none: nothing to remove.
func (r *Reader) ExchangeStart(ctx context.Context, convID, asker, messageID string) (string, error) {
	target := ""
	if messageID != "" {
		m, err := r.st.GetMessage(ctx, convID, messageID)
		switch {
		case parley.ErrorCode(err) == parley.ENOTFOUND:
		case err != nil:
			return "", err
		case m.Role == parley.RoleUser:
			target = m.ID
		default:
			target = m.ID
			if q, err := r.st.GetMessage(ctx, convID, m.ReplyTo); m.ReplyTo != "" && err == nil && q.Role == parley.RoleUser {
				target = q.ID
			}
		}
	}
	// Else the asker's latest question, each message read by itself and
	// only its head looked at: their text may be large.
	for n, before := 0, int64(0); target == "" && n < 20; n++ {
		rows, err := r.st.ListMessagesRaw(ctx, store.ListMessagesParams{ConversationID: convID, AgentID: asker, Latest: true, Limit: 1, Before: before})
		if err != nil || len(rows) == 0 {
			return "", err
		}
		m, _, err := store.ReadRowHead(rows[0].Data)
		if err != nil {
			return "", err
		}
		if m.Role == parley.RoleUser {
			target = m.ID
		}
		before = rows[0].Seq
	}
	return target, nil
}
