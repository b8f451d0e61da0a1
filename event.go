package parley

import (
	"encoding/json"
	"slices"
)

// Event types of the log. The wire event types are the log's event types:
// what is stored is what is streamed.
const (
	// EventConversationCreated is seq 1 of every conversation; Data is the Conversation.
	EventConversationCreated = "conversation.created"
	// EventConversationUpdated records a change of the conversation's
	// title, metadata, participants or members (PATCH
	// /v1/conversations/{id}); Data is ConversationUpdate, the changed
	// fields whole. Turn 0; it opens and closes nothing.
	EventConversationUpdated = "conversation.updated"
	// EventMessage carries a whole Message in Data.
	EventMessage = "message"
	// EventTrace carries an agent's trace (thoughts, tool traces) in Data; it
	// follows the turn rules but never closes anything.
	EventTrace = "trace"
	// EventTurnClaimed records a claim on the next turn; Data is a Claim.
	EventTurnClaimed = "turn.claimed"
	// EventClaimExpired records that a claim lapsed; Data is the Claim.
	EventClaimExpired = "claim.expired"
	// EventTurnReset marks that the owner restarted its open turn; Data is TurnRef.
	EventTurnReset = "turn.reset"
	// EventTurnAborted is the tombstone of a turn its owner gave up; Data is TurnRef.
	EventTurnAborted = "turn.aborted"
	// EventDelegation lets another agent write into the open turn; Data is Delegation.
	EventDelegation = "delegation"
	// EventChunk is one text delta of a streaming message; Data is Chunk.
	EventChunk = "chunk"
	// EventMessageUpdated carries the whole message after it was finalized.
	// (Logs written before part.updated existed also have one after each
	// change of a tool call of a streaming message.)
	EventMessageUpdated = "message.updated"
	// EventPartUpdated is one change of a tool call of a streaming message:
	// the call's part, with what changed; Data is PartUpdate.
	EventPartUpdated = "part.updated"
	// EventMessagesRemoved records a revert: the messages it removed, a
	// message and every one after it; Data is MessagesRemoved.
	EventMessagesRemoved = "messages.removed"
	// EventCompacted stands where a chunk or part.updated event of a message
	// that ended long ago was, once retention compacted it: the message's
	// row holds what it carried. Data is {}; it changes no message.
	EventCompacted = "compacted"

	// The prompt queue's events (Data is the prompt's id and what changed).

	// EventPromptQueued: a prompt joined the queue (or was merged into a
	// collect prompt); it holds the prompt's text.
	EventPromptQueued = "prompt.queued"
	// EventPromptDispatched: a prompt was handed to a runner.
	EventPromptDispatched = "prompt.dispatched"
	// EventPromptCompleted: a prompt was answered.
	EventPromptCompleted = "prompt.completed"
	// EventPromptCanceled: a prompt ended without an answer.
	EventPromptCanceled = "prompt.canceled"
	// EventPromptRequeued: a prompt's runner left and the prompt went back
	// to the front of the queue.
	EventPromptRequeued = "prompt.requeued"
	// EventPromptPromoted: a waiting prompt moved to the front of the queue.
	EventPromptPromoted = "prompt.promoted"
	// EventPromptAborted marks the prompt being answered as aborted (by a
	// steer, a stop, or a revert of its answer): its runner was told to stop,
	// and the prompt ends when the runner answers or leaves; it is never
	// dispatched again.
	EventPromptAborted = "prompt.aborted"
	// EventTaskRun records one firing of a scheduled task; Data is
	// {"taskId", "runId"}, and the run id is the turnId of the prompt it
	// queued.
	EventTaskRun = "task.run"
)

// eventTypes are the event types above: every type a server writes to a
// log. Whatever reads a whole log back (an import, a replay) knows each of
// them; a type added above is added here.
var eventTypes = []string{
	EventConversationCreated, EventConversationUpdated, EventMessage, EventTrace,
	EventTurnClaimed, EventClaimExpired, EventTurnReset, EventTurnAborted, EventDelegation,
	EventChunk, EventMessageUpdated, EventPartUpdated, EventMessagesRemoved, EventCompacted,
	EventPromptQueued, EventPromptDispatched, EventPromptCompleted, EventPromptCanceled,
	EventPromptRequeued, EventPromptPromoted, EventPromptAborted,
	EventTaskRun,
	EventInputAnswered, EventInputAcked,
}

// knownEventTypes is eventTypes as a set.
var knownEventTypes = func() map[string]bool {
	m := make(map[string]bool, len(eventTypes))
	for _, t := range eventTypes {
		m[t] = true
	}
	return m
}()

// EventTypes returns every event type a server writes to a conversation's
// log, conversation.created first.
func EventTypes() []string { return slices.Clone(eventTypes) }

// KnownEventType reports whether typ is one of EventTypes.
func KnownEventType(typ string) bool { return knownEventTypes[typ] }

// Event is one entry of a conversation's log. Seq numbers the events of one
// conversation densely from 1. Turn 0 holds system events.
type Event struct {
	ConversationID string          `json:"conversationId"`
	Seq            int64           `json:"seq"`
	Type           string          `json:"type"`
	Turn           int             `json:"turn"`
	TurnID         string          `json:"turnId,omitempty"`
	AgentID        string          `json:"agentId,omitempty"`
	Finality       Finality        `json:"finality"`
	Time           Time            `json:"ts"`
	Data           json.RawMessage `json:"data"`
}

// TurnRef is the data of turn.reset and turn.aborted events.
type TurnRef struct {
	Turn   int    `json:"turn"`
	Reason string `json:"reason,omitempty"`
}

// Delegation is the data of a delegation event: From lets To write into turn
// Turn with the turn's turnId until the turn closes.
type Delegation struct {
	From string `json:"from"`
	To   string `json:"to"`
	Turn int    `json:"turn"`
}

// Trace is the data of a trace event.
type Trace struct {
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// Chunk is the data of a chunk event: text to append to a streaming message.
type Chunk struct {
	MessageID string `json:"messageId"`
	Content   string `json:"content"`
	// Checkpoint is true when the message's row was rewritten with this
	// chunk, so that the row is complete as of this event's seq.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// StreamingText is text an agent streams in a conversation made with
// messageFormat v1 before a message holds it: a runner of the first
// protocol streams its answer as chunk events that name no message
// (MessageID ""), then sends the text again as a message row. Clients show
// it as the agent's answer so far until that row comes, or until the
// answer ends without one; a snapshot carries each agent's as of its
// position.
type StreamingText struct {
	AgentID string `json:"agentId"`
	Turn    int    `json:"turn"`
	// TurnID is the exchange it belongs to ("" if its events named none).
	TurnID string `json:"turnId"`
	// Seq is the seq of its first chunk, UpdatedSeq of its last.
	Seq        int64  `json:"seq"`
	UpdatedSeq int64  `json:"updatedSeq"`
	Content    string `json:"content"`
}

// PartUpdate is the data of a part.updated event: a tool call of a
// streaming message was added or changed. Part is a tool-call part that
// names the call (CallID) and its status and carries, of its tool name,
// args, result and error, those that changed; apply it with
// Message.ApplyTool.
type PartUpdate struct {
	MessageID string `json:"messageId"`
	Part      Part   `json:"part"`
	// Checkpoint is true when the message's row was rewritten with this
	// event, so that the row is complete as of this event's seq.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// MaxFrameBytes is the largest frame the server sends on a live stream or
// a runner connection, and what the Go SDK accepts: the server's bounds on
// messages and snapshots keep every frame under it.
const MaxFrameBytes = 32 << 20

// MessagesRemoved is the data of a messages.removed event.
type MessagesRemoved struct {
	MessageIDs []string `json:"messageIds"`
}
