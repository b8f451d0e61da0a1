package client

import (
	"cmp"
	"context"
	"slices"

	"github.com/parleyhq/parley"
)

// Fold is a conversation's messages as a client shows them: the frames of a
// Stream folded with the merge rules of the stream protocol. A client that
// joins at any moment (no position, a position, a reload, a reconnect) and
// applies every frame it is given holds exactly the server's messages, once
// it has fetched the messages its snapshot summarized (FetchMissing):
//
//   - init with recovered false: drop everything; hold init.messages (the
//     newest messages and every message still streaming, each complete as
//     of its updatedSeq; a large one summarized, without its parts and
//     content). Init with recovered true: keep what you hold.
//   - message: hold the message (replacing one with the same id).
//   - message.updated: replace the message with the same id (hold it if you
//     did not).
//   - chunk: if you hold the message whole (not summarized) and the chunk's
//     seq is after the message's updatedSeq, append the chunk's text to the
//     message's last part when that is a streaming text part, else add a
//     streaming text part; content grows by the text; updatedSeq becomes
//     the chunk's seq. Otherwise ignore it: the message already has it, or
//     its fetched copy will.
//   - part.updated: the same, but apply the event's tool-call part to the
//     message with parley.Message.ApplyPart (change the call with its
//     callId, or add it, which ends the streaming text part).
//   - messages.removed: drop the messages named.
//   - every other frame leaves the messages as they are.
//
// A conversation made with messageFormat v1 also has text streamed before
// a message holds it: chunks with an empty messageId. The fold keeps it
// apart from the messages, as one StreamingText per agent (Streaming): a
// chunk that names no message appends its text to its agent's (the event's
// agentId), or starts it, unless its seq is not after the text's
// updatedSeq. The agent's text is dropped by its next message event (the
// row that holds the text), a message or message.updated of its that
// closes its turn, its turn.reset or turn.aborted, or its prompt.completed,
// prompt.canceled or prompt.requeued; every text is dropped by a message
// that closes the conversation, by messages.removed, and by an init with
// recovered false, which holds the texts of its snapshot (init.streaming,
// each agent's as of the snapshot's position) instead.
//
// The fold also holds the conversation's record (Conversation): an init's
// conversation, conversation.created's, and each conversation.updated
// applied to it (its title, metadata, participants and members).
//
// A summarized message is replaced by a copy read over HTTP (Hold), or by
// the next message or message.updated event of it.
//
// Messages are ordered by seq (the seq of the event that created each).
// The zero Fold is empty and ready to use; it is not safe for concurrent use.
type Fold struct {
	msgs  map[string]*parley.Message
	texts map[string]*StreamingText // by agent
	conv  *parley.Conversation
}

// Conversation returns the conversation's record as the frames folded
// in leave it, and false if none told it yet (no init, no
// conversation.created or conversation.updated).
func (f *Fold) Conversation() (parley.Conversation, bool) {
	if f.conv == nil {
		return parley.Conversation{}, false
	}
	c := *f.conv
	c.Participants, c.Members = slices.Clone(c.Participants), slices.Clone(c.Members)
	return c, true
}

// Apply folds one frame of a Stream in. It returns an error only for an
// event whose data is not what its type says (nothing is changed then).
func (f *Fold) Apply(fr Frame) error {
	switch {
	case fr.Init != nil:
		c := fr.Init.Conversation
		f.conv = &c
		if !fr.Init.Recovered {
			f.msgs = make(map[string]*parley.Message, len(fr.Init.Messages))
			f.texts = nil
			for _, m := range fr.Init.Messages {
				f.hold(m)
			}
			for _, t := range fr.Init.Streaming {
				f.startText(t)
			}
		}
	case fr.Event != nil:
		return f.ApplyEvent(*fr.Event)
	}
	return nil
}

// ApplyEvent folds one event of the log in (as a Stream or GET …/events
// returns it).
func (f *Fold) ApplyEvent(e parley.Event) error {
	switch e.Type {
	case parley.EventMessage, parley.EventMessageUpdated, parley.EventChunk, parley.EventPartUpdated, parley.EventInputAnswered, parley.EventMessagesRemoved,
		parley.EventConversationCreated, parley.EventConversationUpdated:
	default:
		f.applyStreaming(&e, nil) // it changes no message: not worth decoding
		return nil
	}
	d, err := DecodeEvent(e)
	if err != nil {
		return err
	}
	f.applyData(&e, d)
	return nil
}

// applyData folds in the event e, whose data decoded is d.
func (f *Fold) applyData(e *parley.Event, d EventData) {
	f.applyStreaming(e, d)
	seq := e.Seq
	switch d := d.(type) {
	case *MessageEvent:
		f.hold(&d.Message)
	case *MessageUpdated:
		f.hold(&d.Message)
	case *Chunk:
		if m := f.growing(d.MessageID, seq); m != nil {
			m.AppendText(d.Content)
			m.UpdatedSeq = seq
		}
	case *PartUpdated:
		if m := f.growing(d.MessageID, seq); m != nil {
			m.ApplyPart(d.Part)
			m.UpdatedSeq = seq
		}
	case *InputAnswered:
		if m := f.growing(d.MessageID, seq); m != nil {
			m.ApplyInputAnswered(d.InputAnswered)
			m.UpdatedSeq = seq
		}
	case *MessagesRemoved:
		for _, id := range d.MessageIDs {
			delete(f.msgs, id)
		}
	case *ConversationCreated:
		c := d.Conversation
		f.conv = &c
	case *ConversationUpdated:
		c := parley.Conversation{ID: e.ConversationID} // its other fields come with an init or conversation.created
		if f.conv != nil {
			c = *f.conv
		}
		c = d.Apply(c)
		f.conv = &c
	}
}

// growing returns the message an event at seq adds to, if the fold holds
// it whole and not yet as of seq; nil otherwise.
func (f *Fold) growing(id string, seq int64) *parley.Message {
	if m := f.msgs[id]; m != nil && m.Summarized == nil && seq > m.UpdatedSeq {
		return m
	}
	return nil
}

// Missing returns the ids of the messages the fold holds summarized (a
// snapshot leaves out the parts and content of a large message), in seq
// order: fetch each with Client.Message and give it to Hold, or call
// Client.FetchMissing.
func (f *Fold) Missing() []string {
	var out []*parley.Message
	for _, m := range f.msgs {
		if m.Summarized != nil {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *parley.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	ids := make([]string, len(out))
	for i, m := range out {
		ids[i] = m.ID
	}
	return ids
}

// Hold puts a message read over HTTP (Client.Message) in place of the copy
// the fold holds of it, if that copy is summarized, or is older than m (its
// updatedSeq is lower). A message the fold does not hold is not added (it
// was removed meanwhile, or is older than the fold's snapshot); nor is a
// summarized m. It reports whether the fold took m. A streaming message
// read over HTTP is complete as of its updatedSeq, which is at least the
// seq of every event the fold was given, so the chunks after it continue it.
func (f *Fold) Hold(m *parley.Message) bool {
	held := f.msgs[m.ID]
	if held == nil || m.Summarized != nil || (held.Summarized == nil && m.UpdatedSeq <= held.UpdatedSeq) ||
		(held.Summarized != nil && m.UpdatedSeq < held.UpdatedSeq) {
		return false
	}
	f.hold(m)
	return true
}

// hold keeps a copy of m, replacing any message with its id.
func (f *Fold) hold(m *parley.Message) {
	if f.msgs == nil {
		f.msgs = make(map[string]*parley.Message)
	}
	if m.Summarized != nil {
		m = m.Summarize(m.Summarized.Bytes) // a summary holds no text, whatever it came with
	}
	f.msgs[m.ID] = clone(m)
}

// clone copies a message deep enough that folding more frames into one copy
// never changes the other (parts are the only part a fold changes in
// place).
func clone(m *parley.Message) *parley.Message {
	c := *m
	c.Parts = slices.Clone(m.Parts)
	if c.Parts == nil {
		c.Parts = []parley.Part{}
	}
	if m.Summarized != nil {
		s := *m.Summarized
		c.Summarized = &s
	}
	return &c
}

// Message returns a copy of the message with that id, or nil.
func (f *Fold) Message(id string) *parley.Message {
	if m := f.msgs[id]; m != nil {
		return clone(m)
	}
	return nil
}

// Messages returns copies of the messages held, in seq order.
func (f *Fold) Messages() []*parley.Message {
	out := make([]*parley.Message, 0, len(f.msgs))
	for _, m := range f.msgs {
		out = append(out, clone(m))
	}
	slices.SortFunc(out, func(a, b *parley.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// FetchMissing reads every message the fold holds summarized (Fold.Missing)
// and gives it to the fold (Fold.Hold), so that the fold holds every
// message whole. A message removed since is skipped: the stream brings its
// removal.
func (c *Client) FetchMissing(ctx context.Context, conversationID string, f *Fold) error {
	for _, id := range f.Missing() {
		m, err := c.Message(ctx, conversationID, id)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			continue
		}
		if err != nil {
			return err
		}
		f.Hold(m)
	}
	return nil
}
