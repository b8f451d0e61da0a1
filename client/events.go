package client

import (
	"encoding/json"
	"fmt"

	"github.com/parleyhq/parley"
)

// EventData is the data of an event of the log, decoded by the event's
// type (DecodeEvent, Frame.Decode): a pointer to one of the types below,
// for a type switch:
//
//	switch d := data.(type) {
//	case *client.MessageEvent:    // message: d.Message is the whole message
//	case *client.Chunk:           // chunk: d.MessageID grows by d.Content
//	case *client.PartUpdated:     // part.updated: a tool call of d.MessageID changed, or an input request opened
//	case *client.InputAnswered:   // input.answered: an input request of d.MessageID ended
//	case *client.MessageUpdated:  // message.updated: d.Message as it ended
//	case *client.PromptQueued:    // and so on, one type per event type
//	case *client.UnknownEvent:    // a type this SDK does not know (a newer server's)
//	}
type EventData interface {
	// EventType is the type of the event the data came with, such as
	// "chunk" or "prompt.queued".
	EventType() string
}

// Event types of the prompt queue and the scheduler (the log's other types
// are parley's Event* constants; parley.EventTypes lists them all).
const (
	EventPromptQueued     = parley.EventPromptQueued
	EventPromptDispatched = parley.EventPromptDispatched
	EventPromptAborted    = parley.EventPromptAborted
	EventPromptCompleted  = parley.EventPromptCompleted
	EventPromptCanceled   = parley.EventPromptCanceled
	EventPromptRequeued   = parley.EventPromptRequeued
	EventPromptPromoted   = parley.EventPromptPromoted
	EventTaskRun          = parley.EventTaskRun
)

// ConversationCreated is the data of conversation.created (seq 1): the
// conversation as made.
type ConversationCreated struct{ parley.Conversation }

// ConversationUpdated is the data of conversation.updated: the
// conversation's title, metadata, participants and members after a
// change (whole), and who made it; fold it into a conversation with
// parley.ConversationUpdate.Apply (Fold does).
type ConversationUpdated struct{ parley.ConversationUpdate }

// MessageEvent is the data of message: a whole message (one a runner
// streams starts empty, with status streaming).
type MessageEvent struct{ parley.Message }

// MessageUpdated is the data of message.updated: a whole message again,
// once it ended (in logs of earlier versions, also after a tool change).
type MessageUpdated struct{ parley.Message }

// Chunk is the data of chunk: text appended to a streaming message.
type Chunk struct{ parley.Chunk }

// PartUpdated is the data of part.updated: a tool call of a streaming
// message was added or changed, or an input request opened (apply it with
// parley.Message.ApplyPart).
type PartUpdated struct{ parley.PartUpdate }

// InputAnswered is the data of input.answered: an input request ended,
// answered, expired or canceled (apply it with
// parley.Message.ApplyInputAnswered).
type InputAnswered struct{ parley.InputAnswered }

// InputAcked is the data of input.acked: the runner that asked has the
// outcome of an input request.
type InputAcked struct{ parley.InputAcked }

// MessagesRemoved is the data of messages.removed: a revert removed these
// messages.
type MessagesRemoved struct{ parley.MessagesRemoved }

// Trace is the data of trace: an agent's trace.
type Trace struct{ parley.Trace }

// TurnClaimed is the data of turn.claimed: an agent claimed the next turn.
type TurnClaimed struct{ parley.Claim }

// ClaimExpired is the data of claim.expired: a claim lapsed.
type ClaimExpired struct{ parley.Claim }

// TurnReset is the data of turn.reset: the owner restarted its open turn.
type TurnReset struct{ parley.TurnRef }

// TurnAborted is the data of turn.aborted: the tombstone of a turn given up
// (Reason "reverted" when a revert ended it).
type TurnAborted struct{ parley.TurnRef }

// Delegation is the data of delegation: From lets To write into turn Turn.
type Delegation struct{ parley.Delegation }

// TaskRun is the data of task.run: a scheduled task fired; RunID is the
// turnId of the prompt it queued.
type TaskRun struct {
	TaskID string `json:"taskId"`
	RunID  string `json:"runId"`
}

// The data of the prompt queue's events.
type (
	// PromptQueued is the data of prompt.queued: a prompt joined the
	// queue, or (Into set) was merged into the collect prompt Into.
	PromptQueued = parley.PromptQueued
	// PromptDispatched is the data of prompt.dispatched: prompt ID was
	// handed to Runner.
	PromptDispatched = parley.PromptDispatched
	// PromptAborted is the data of prompt.aborted: the answer to prompt ID
	// was aborted and Runner told to stop.
	PromptAborted = parley.PromptAborted
	// PromptCompleted is the data of prompt.completed: prompt ID was
	// answered.
	PromptCompleted = parley.PromptCompleted
	// PromptCanceled is the data of prompt.canceled: prompt ID ended
	// without an answer.
	PromptCanceled = parley.PromptCanceled
	// PromptRequeued is the data of prompt.requeued: prompt ID's runner
	// left, and the prompt went back to the front of the queue.
	PromptRequeued = parley.PromptRequeued
	// PromptPromoted is the data of prompt.promoted: prompt ID moved to
	// the front of the queue.
	PromptPromoted = parley.PromptPromoted
)

// Compacted is the data of compacted: where a chunk or part.updated event
// of a message that ended long ago was, once the server's retention
// compacted it. It carries nothing and changes no message: the
// message.updated that ended the message carries everything it did.
type Compacted struct{}

// UnknownEvent is the data of an event whose type this SDK does not know,
// undecoded.
type UnknownEvent struct {
	Type string
	Data json.RawMessage
}

// EventType implements EventData.
func (*ConversationCreated) EventType() string { return parley.EventConversationCreated }

// EventType implements EventData.
func (*ConversationUpdated) EventType() string { return parley.EventConversationUpdated }

// EventType implements EventData.
func (*MessageEvent) EventType() string { return parley.EventMessage }

// EventType implements EventData.
func (*MessageUpdated) EventType() string { return parley.EventMessageUpdated }

// EventType implements EventData.
func (*Chunk) EventType() string { return parley.EventChunk }

// EventType implements EventData.
func (*PartUpdated) EventType() string { return parley.EventPartUpdated }

// EventType implements EventData.
func (*MessagesRemoved) EventType() string { return parley.EventMessagesRemoved }

// EventType implements EventData.
func (*InputAnswered) EventType() string { return parley.EventInputAnswered }

// EventType implements EventData.
func (*InputAcked) EventType() string { return parley.EventInputAcked }

// EventType implements EventData.
func (*Trace) EventType() string { return parley.EventTrace }

// EventType implements EventData.
func (*TurnClaimed) EventType() string { return parley.EventTurnClaimed }

// EventType implements EventData.
func (*ClaimExpired) EventType() string { return parley.EventClaimExpired }

// EventType implements EventData.
func (*TurnReset) EventType() string { return parley.EventTurnReset }

// EventType implements EventData.
func (*TurnAborted) EventType() string { return parley.EventTurnAborted }

// EventType implements EventData.
func (*Delegation) EventType() string { return parley.EventDelegation }

// EventType implements EventData.
func (*TaskRun) EventType() string { return EventTaskRun }

// EventType implements EventData.
func (*Compacted) EventType() string { return parley.EventCompacted }

// EventType implements EventData.
func (u *UnknownEvent) EventType() string { return u.Type }

// newEventData returns an empty value of the data type of event type typ,
// nil for a type this SDK does not know.
func newEventData(typ string) EventData {
	switch typ {
	case parley.EventConversationCreated:
		return &ConversationCreated{}
	case parley.EventConversationUpdated:
		return &ConversationUpdated{}
	case parley.EventMessage:
		return &MessageEvent{}
	case parley.EventMessageUpdated:
		return &MessageUpdated{}
	case parley.EventChunk:
		return &Chunk{}
	case parley.EventPartUpdated:
		return &PartUpdated{}
	case parley.EventInputAnswered:
		return &InputAnswered{}
	case parley.EventInputAcked:
		return &InputAcked{}
	case parley.EventMessagesRemoved:
		return &MessagesRemoved{}
	case parley.EventTrace:
		return &Trace{}
	case parley.EventTurnClaimed:
		return &TurnClaimed{}
	case parley.EventClaimExpired:
		return &ClaimExpired{}
	case parley.EventTurnReset:
		return &TurnReset{}
	case parley.EventTurnAborted:
		return &TurnAborted{}
	case parley.EventDelegation:
		return &Delegation{}
	case EventTaskRun:
		return &TaskRun{}
	case EventPromptQueued:
		return &PromptQueued{}
	case EventPromptDispatched:
		return &PromptDispatched{}
	case EventPromptAborted:
		return &PromptAborted{}
	case EventPromptCompleted:
		return &PromptCompleted{}
	case EventPromptCanceled:
		return &PromptCanceled{}
	case EventPromptRequeued:
		return &PromptRequeued{}
	case EventPromptPromoted:
		return &PromptPromoted{}
	case parley.EventCompacted:
		return &Compacted{}
	}
	return nil
}

// DecodeEvent decodes an event's data by its type: one of the EventData
// types, or *UnknownEvent for a type this SDK does not know. It fails only
// when the data is not what its type says.
func DecodeEvent(e parley.Event) (EventData, error) {
	d := newEventData(e.Type)
	if d == nil {
		return &UnknownEvent{Type: e.Type, Data: e.Data}, nil
	}
	if err := json.Unmarshal(e.Data, d); err != nil {
		return nil, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
	}
	return d, nil
}

// Decode decodes the data of an event frame (DecodeEvent); it returns nil
// and no error for an init or guidance frame, which carry no event.
func (f Frame) Decode() (EventData, error) {
	if f.Event == nil {
		return nil, nil
	}
	return DecodeEvent(*f.Event)
}
