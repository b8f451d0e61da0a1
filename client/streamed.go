package client

import (
	"cmp"
	"slices"

	"github.com/parleyhq/parley"
)

// StreamingText is text an agent streams in a conversation made with
// messageFormat v1 before a message holds it: a runner of the first
// protocol streams its answer as chunk events that name no message
// (messageId ""), then sends the text again as a message row. A client
// shows it as the agent's answer so far until that row comes, or until
// the answer ends without one (see Fold); a snapshot (Init.Streaming)
// carries each agent's as of its position.
type StreamingText = parley.StreamingText

// endsStreaming are the events of an agent after which the text it streamed
// with no message is no longer shown: its turn restarted or ended, or the
// prompt it answered ended (completed, canceled, or put back in the queue
// when its runner left).
var endsStreaming = map[string]bool{
	parley.EventTurnReset: true, parley.EventTurnAborted: true,
	EventPromptCompleted: true, EventPromptCanceled: true, EventPromptRequeued: true,
}

// applyStreaming folds the event e, whose data is d (nil if not decoded),
// into the text agents stream with no message, by the rules of Fold. An
// event at or before an agent's text's UpdatedSeq changes nothing of it.
func (f *Fold) applyStreaming(e *parley.Event, d EventData) {
	switch d := d.(type) {
	case *Chunk:
		if d.MessageID == "" {
			f.streamText(e, d.Content)
		}
		return
	case *MessageEvent:
		f.endText(d.AgentID, e.Seq) // its next row: it holds the text
		if d.Finality == parley.FinalityConversation {
			f.endTexts(e.Seq)
		}
		return
	case *MessageUpdated:
		switch d.Finality {
		case parley.FinalityTurn:
			f.endText(d.AgentID, e.Seq)
		case parley.FinalityConversation:
			f.endTexts(e.Seq)
		}
		return
	case *MessagesRemoved:
		f.endTexts(e.Seq) // a revert rewinds the conversation
		return
	}
	if endsStreaming[e.Type] {
		f.endText(e.AgentID, e.Seq)
	}
}

// streamText appends a chunk that names no message to its agent's text.
func (f *Fold) streamText(e *parley.Event, content string) {
	if t := f.texts[e.AgentID]; t != nil {
		if e.Seq > t.UpdatedSeq {
			t.Content += content
			t.UpdatedSeq = e.Seq
		}
		return
	}
	f.startText(StreamingText{AgentID: e.AgentID, Turn: e.Turn, TurnID: e.TurnID, Seq: e.Seq, UpdatedSeq: e.Seq, Content: content})
}

// startText holds an agent's text: its first chunk, or a snapshot's.
func (f *Fold) startText(t StreamingText) {
	if f.texts == nil {
		f.texts = make(map[string]*StreamingText)
	}
	f.texts[t.AgentID] = &t
}

// endText stops showing an agent's text, if the event at seq is after it.
func (f *Fold) endText(agent string, seq int64) {
	if t := f.texts[agent]; t != nil && seq > t.UpdatedSeq {
		delete(f.texts, agent)
	}
}

// endTexts stops showing every agent's text that the event at seq is after.
func (f *Fold) endTexts(seq int64) {
	for agent := range f.texts {
		f.endText(agent, seq)
	}
}

// Streaming returns copies of the texts agents stream with no message
// (conversations made with messageFormat v1), at most one per agent, in
// the order they started (by Seq). A client shows each as its agent's
// answer so far, after the messages before its Seq.
func (f *Fold) Streaming() []StreamingText {
	out := make([]StreamingText, 0, len(f.texts))
	for _, t := range f.texts {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b StreamingText) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}
