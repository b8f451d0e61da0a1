package parley

// A conversation's prompt queue, as the API shows it: the prompts waiting
// or being answered (QueuedPrompt), what each waiting one waits for
// (WaitingOn), and where one prompt stands (PromptStatus).

// QueuedPrompt is a prompt in a conversation's queue, waiting or being
// answered. Its text is in its prompt.queued events (Parts are their seqs).
type QueuedPrompt struct {
	ID      string   `json:"id"`
	Mode    string   `json:"mode"`
	AgentID string   `json:"agentId"`
	To      string   `json:"to,omitempty"`
	Channel *Channel `json:"channel,omitempty"`
	// Parts are the seqs of the prompt.queued events that hold its text (a
	// collect prompt has one per prompt merged into it).
	Parts []int64 `json:"parts"`
	// Until is when a collect prompt stops collecting.
	Until Time `json:"until"`
	// Runner is the agent it was dispatched to; empty while it waits.
	Runner string `json:"runner,omitempty"`
	// Written is true once its user message exists (it was dispatched
	// before).
	Written bool `json:"written,omitempty"`
	// TurnID is the exchange its message starts: a task run's id, or empty
	// for the prompt's own id.
	TurnID string `json:"turnId,omitempty"`
	// Bytes is the length of its text (its parts joined by blank lines).
	Bytes int `json:"bytes,omitempty"`
	// Aborted is true once its answer was aborted: it ends when its runner
	// answers (aborted, complete) or leaves, and is never dispatched again.
	Aborted bool `json:"aborted,omitempty"`
	// WaitingOn says what a waiting prompt waits for; nil on the prompt
	// being answered and on one about to be dispatched. It is never
	// stored: the server fills it in the queue it shows, for it depends
	// on the runners attached and the time.
	WaitingOn *WaitingOn `json:"waitingOn,omitempty"`
}

// Exchange is the turnId of the exchange the prompt starts: its task run's,
// or its own id.
func (p QueuedPrompt) Exchange() string {
	if p.TurnID != "" {
		return p.TurnID
	}
	return p.ID
}

// WaitingOn is what a waiting prompt waits for.
type WaitingOn struct {
	// Reason is "turn" (another agent's open turn), "claim" (another
	// agent's claim on the next turn), "prompt" (the prompt being
	// answered), "queue" (a prompt ahead of it), "runner" (a runner of the
	// agent it is for, or of any agent) or "collect" (a collect window).
	Reason string `json:"reason"`
	// AgentID holds what it waits for: the turn's owner, the claim's
	// holder, the runner answering, the agent a runner is wanted of.
	AgentID string `json:"agentId,omitempty"`
	// Turn and TurnID name the open or claimed turn.
	Turn   int    `json:"turn,omitempty"`
	TurnID string `json:"turnId,omitempty"`
	// PromptID is the prompt being answered, ahead of it, or collecting.
	PromptID string `json:"promptId,omitempty"`
	// Until is when what it waits for ends at the latest, if known: the
	// turn's lease, the claim, the collect window.
	Until *Time `json:"until,omitempty"`
}

// Prompt states (PromptStatus.State).
const (
	PromptStateQueued     = "queued"     // waiting in the queue (WaitingOn says on what)
	PromptStateDispatched = "dispatched" // handed to a runner that has not written its answer yet
	PromptStateAnswering  = "answering"  // its runner writes its answer (MessageID)
	PromptStateCompleted  = "completed"  // answered
	PromptStateCanceled   = "canceled"   // ended without an answer, or with an aborted one (Reason)
)

// PromptStatus is where a prompt stands (GET …/prompts/{pid}): queued and
// on what it waits, dispatched, answering, or how it ended.
type PromptStatus struct {
	ID string `json:"id"`
	// State is PromptStateQueued, PromptStateDispatched, PromptStateAnswering,
	// PromptStateCompleted or PromptStateCanceled.
	State string `json:"state"`
	// AgentID asked it.
	AgentID string `json:"agentId"`
	// Position is its place in the queue (0: first), while it is in it.
	Position *int `json:"position,omitempty"`
	// WaitingOn says what a queued prompt waits for; nil on one about to
	// be dispatched.
	WaitingOn *WaitingOn `json:"waitingOn,omitempty"`
	// Runner is the agent it was dispatched to.
	Runner string `json:"runner,omitempty"`
	// MessageID is its answer: the runner's newest message in the
	// prompt's exchange.
	MessageID string `json:"messageId,omitempty"`
	// Aborted is set on a prompt being answered once its answer was
	// stopped: it ends when its runner answers or leaves.
	Aborted bool `json:"aborted,omitempty"`
	// Reason says why it was canceled (withdrawn, aborted).
	Reason string `json:"reason,omitempty"`
	// EndedSeq and EndedAt are the seq and time of the event that ended it.
	EndedSeq int64 `json:"endedSeq,omitempty"`
	EndedAt  Time  `json:"endedAt,omitzero"`
	// Queued is the prompt as the queue holds it, while it is in it.
	Queued *QueuedPrompt `json:"queued,omitempty"`
	// TurnID is its exchange: the turnId of its message and its answer.
	TurnID string `json:"turnId"`
	// LastSeq is the conversation's last seq as of this status.
	LastSeq int64 `json:"lastSeq"`
}

// Ended reports whether the prompt has ended: completed or canceled.
func (p *PromptStatus) Ended() bool {
	return p.State == PromptStateCompleted || p.State == PromptStateCanceled
}
