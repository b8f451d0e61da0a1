package client

import (
	"context"
	"iter"

	"github.com/parleyhq/parley"
)

// Accumulator folds a conversation's stream into its messages, as the
// OpenAI SDK's ChatCompletionAccumulator folds chunks into a completion:
// give it every frame of a Stream (Add, or range over Updates) and read
// the messages whole at any moment, each exactly as the server holds it.
// It is a Fold that also reads over HTTP what a snapshot summarized, and
// says of each frame what it changed: which message grew, which one just
// finished, which ones a revert removed.
//
// It is not safe for concurrent use.
type Accumulator struct {
	c    *Client
	conv string
	fold Fold
}

// NewAccumulator returns an empty Accumulator of a conversation's stream;
// c reads the messages a snapshot summarizes.
func NewAccumulator(c *Client, conversationID string) *Accumulator {
	return &Accumulator{c: c, conv: conversationID}
}

// Update is what one frame changed.
type Update struct {
	// Frame is the frame added.
	Frame Frame
	// Data is the frame's event data, decoded (nil for init and guidance).
	Data EventData
	// Message is the message the frame created or changed, as the
	// accumulator now holds it (a copy); nil if it changed none (a chunk it
	// already had, a prompt event, a guidance).
	Message *parley.Message
	// Finished is true when Message ended with this frame: it is no longer
	// streaming, and was streaming (or not held) before. A message written
	// whole finishes in the frame that brings it.
	Finished bool
	// Streaming is the text an agent streams with no message (a v1
	// conversation's chunk that names none), as the accumulator now holds
	// it, when the frame grew it (a copy); see Fold.Streaming.
	Streaming *StreamingText
	// Removed are the ids of the messages a revert removed.
	Removed []string
	// Reset is true after an init frame that replaced everything held with
	// its snapshot (the first connect, or a history replaced).
	Reset bool
}

// Add folds one frame in. After an init frame whose snapshot summarized
// large messages it reads them over HTTP (Client.FetchMissing), so that
// every message it holds is whole; an error is that read's, or an event
// whose data is not what its type says.
func (a *Accumulator) Add(ctx context.Context, f Frame) (Update, error) {
	u := Update{Frame: f}
	switch {
	case f.Init != nil:
		_ = a.fold.Apply(f) // an init holds no event data to refuse
		u.Reset = !f.Init.Recovered
		if len(a.fold.Missing()) > 0 {
			if err := a.c.FetchMissing(ctx, a.conv, &a.fold); err != nil {
				return u, err
			}
		}
	case f.Event != nil:
		d, err := DecodeEvent(*f.Event)
		if err != nil {
			return u, err
		}
		u.Data = d
		id, grows := "", false
		switch d := d.(type) {
		case *MessageEvent:
			id = d.ID
		case *MessageUpdated:
			id = d.ID
		case *Chunk:
			id, grows = d.MessageID, true
		case *PartUpdated:
			id, grows = d.MessageID, true
		case *InputAnswered:
			id, grows = d.MessageID, true
		case *MessagesRemoved:
			u.Removed = d.MessageIDs
		}
		before := a.fold.msgs[id]
		wasStreaming := before == nil || before.Status == parley.StatusStreaming
		if grows && a.fold.growing(id, f.Event.Seq) == nil {
			id = "" // the message has this already, or is not held
		}
		a.fold.applyData(f.Event, d)
		if c, ok := d.(*Chunk); ok && c.MessageID == "" {
			if t := a.fold.texts[f.Event.AgentID]; t != nil && t.UpdatedSeq == f.Event.Seq {
				grown := *t
				u.Streaming = &grown
			}
		}
		if id != "" {
			if m := a.fold.Message(id); m != nil {
				u.Message = m
				u.Finished = wasStreaming && m.Status != parley.StatusStreaming
			}
		}
	}
	return u, nil
}

// Updates adds every frame of st (Add) and yields what each changed, until
// ctx ends, the server refuses the stream, or Add fails: that error is
// yielded once and ends the iteration.
//
//	acc := client.NewAccumulator(c, id)
//	for u, err := range acc.Updates(ctx, c.Subscribe(ctx, id, client.SubscribeOptions{})) {
//		if err != nil { return err }
//		if u.Finished { fmt.Println(u.Message.AgentID, u.Message.Content) }
//	}
func (a *Accumulator) Updates(ctx context.Context, st *Stream) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		for f, err := range st.Frames(ctx) {
			var u Update
			if err == nil {
				u, err = a.Add(ctx, f)
			}
			if !yield(u, err) || err != nil {
				return
			}
		}
	}
}

// Messages returns copies of the messages held, in seq order.
func (a *Accumulator) Messages() []*parley.Message { return a.fold.Messages() }

// Streaming returns the texts agents stream with no message (Fold.Streaming).
func (a *Accumulator) Streaming() []StreamingText { return a.fold.Streaming() }

// Message returns a copy of the message with that id, or nil.
func (a *Accumulator) Message(id string) *parley.Message { return a.fold.Message(id) }

// Conversation returns the conversation's record as the frames added
// leave it (Fold.Conversation): a conversation.updated changes it.
func (a *Accumulator) Conversation() (parley.Conversation, bool) { return a.fold.Conversation() }
