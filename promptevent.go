package parley

// The data of the prompt queue's events, as the server writes them and
// clients read them: one type per event type. Every one of them carries
// "until", null but on a collect prompt's prompt.queued, as the server has
// always written it.

// PromptQueued is the data of prompt.queued: a prompt joined the queue, or
// (Into set) was merged into the collect prompt Into.
type PromptQueued struct {
	ID      string   `json:"id"`
	Into    string   `json:"into,omitempty"`
	Content string   `json:"content,omitempty"`
	Mode    string   `json:"mode,omitempty"`
	To      string   `json:"to,omitempty"`
	Channel *Channel `json:"channel,omitempty"`
	// Until is when a collect prompt stops collecting.
	Until Time `json:"until"`
	// TurnID is the exchange of a task run's prompt.
	TurnID string `json:"turnId,omitempty"`
}

// PromptDispatched is the data of prompt.dispatched: prompt ID was handed
// to Runner (its user message was written just before, the first time).
type PromptDispatched struct {
	ID     string `json:"id"`
	Runner string `json:"runner,omitempty"`
	noUntil
}

// PromptAborted is the data of prompt.aborted: the answer to prompt ID was
// aborted (Reason steered, stopped or reverted) and Runner told to stop.
type PromptAborted struct {
	ID     string `json:"id"`
	Runner string `json:"runner,omitempty"`
	Reason string `json:"reason,omitempty"`
	noUntil
}

// PromptCompleted is the data of prompt.completed: prompt ID was answered.
type PromptCompleted struct {
	ID string `json:"id"`
	noUntil
}

// PromptCanceled is the data of prompt.canceled: prompt ID ended without an
// answer (Reason withdrawn, or aborted once its runner stopped).
type PromptCanceled struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
	noUntil
}

// PromptRequeued is the data of prompt.requeued: prompt ID's runner left,
// and the prompt went back to the front of the queue.
type PromptRequeued struct {
	ID string `json:"id"`
	noUntil
}

// PromptPromoted is the data of prompt.promoted: prompt ID moved to the
// front of the queue.
type PromptPromoted struct {
	ID string `json:"id"`
	noUntil
}

// noUntil is the "until" every prompt event's data carries: null, but on
// a collect prompt's prompt.queued.
type noUntil struct {
	Until Time `json:"until"`
}

// EventType is EventPromptQueued.
func (*PromptQueued) EventType() string { return EventPromptQueued }

// EventType is EventPromptDispatched.
func (*PromptDispatched) EventType() string { return EventPromptDispatched }

// EventType is EventPromptAborted.
func (*PromptAborted) EventType() string { return EventPromptAborted }

// EventType is EventPromptCompleted.
func (*PromptCompleted) EventType() string { return EventPromptCompleted }

// EventType is EventPromptCanceled.
func (*PromptCanceled) EventType() string { return EventPromptCanceled }

// EventType is EventPromptRequeued.
func (*PromptRequeued) EventType() string { return EventPromptRequeued }

// EventType is EventPromptPromoted.
func (*PromptPromoted) EventType() string { return EventPromptPromoted }
