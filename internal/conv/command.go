package conv

import (
	"encoding/json"
	"time"

	"github.com/parleyhq/parley"
)

// Limits bound what one command may carry and how the rules behave.
type Limits struct {
	// MaxThreadDepth is the bound on a message's ancestors: a message with this
	// many ancestors or more is refused.
	MaxThreadDepth int
	// MaxParts bounds the parts of one message.
	MaxParts int
	// MaxTextBytes bounds the text of one message (its content).
	MaxTextBytes int
	// MaxMessageBytes bounds the whole of one message, as parley.Message.Size
	// counts it (text, tool calls' args, results and errors, error parts,
	// metadata), on every path that writes one: a posted message, a text
	// delta, a tool update and a finalize. With MaxTextBytes it bounds what
	// any frame carrying one message weighs (see MaxMessageJSON).
	MaxMessageBytes int
	// MaxStreaming bounds the messages that stream at once in one
	// conversation: starting one more is refused (409 busy) until one ends.
	MaxStreaming int
	// MaxMetadataBytes bounds a message's metadata and a trace's payload.
	MaxMetadataBytes int
	// ClaimTTL is how long a claim lasts when the command names no TTL.
	ClaimTTL time.Duration
	// MaxClaimTTL bounds the TTL a command may ask for.
	MaxClaimTTL time.Duration
	// MaxParticipants bounds a conversation's participant list.
	MaxParticipants int
	// CheckpointChunks and CheckpointBytes set when a streaming message's
	// row is written again: after that many chunks or text bytes since the
	// last write, or after as many as the row already holds if that is more.
	CheckpointChunks int
	CheckpointBytes  int
	// MaxQueuedPrompts bounds a conversation's prompt queue: the prompts
	// waiting or being answered, each prompt merged into a collect prompt
	// counted as one more. A prompt past it is refused (busy), and a task's
	// firing is skipped. Zero means DefaultLimits' value.
	MaxQueuedPrompts int
	// MaxDelegates bounds the agents delegated into one turn (its owner's
	// delegates and theirs): one more is refused (busy) until the turn
	// closes. Each is in the conversation's state, its head and every 409
	// that carries the head. Zero means DefaultLimits' value.
	MaxDelegates int
}

// DefaultLimits are the limits used when none are configured.
var DefaultLimits = Limits{
	MaxThreadDepth:   100,
	MaxParts:         512,
	MaxTextBytes:     512 << 10,
	MaxMessageBytes:  1 << 20,
	MaxStreaming:     32,
	MaxMetadataBytes: 16 << 10,
	ClaimTTL:         30 * time.Second,
	MaxClaimTTL:      10 * time.Minute,
	MaxParticipants:  64,
	CheckpointChunks: 64,
	CheckpointBytes:  16 << 10,
	MaxQueuedPrompts: 256,
	MaxDelegates:     64,
}

// MaxMessageJSON is the most a message within these limits can weigh in
// JSON: its text twice (the text parts and the content), every byte of
// text and of the rest escaped at worst to six (\u003c), and each part's
// fixed fields (its keys, its type, a status and a reason of at most
// MaxPartWordBytes, a call id and a tool name of at most 128 bytes,
// escaped). Frames that carry a message (message and
// message.updated events, a runner's message.state) stay under it plus
// their envelope, which must stay under parley.MaxFrameBytes.
func (l Limits) MaxMessageJSON() int {
	const perPart = 192 + 2*6*MaxPartWordBytes + 2*6*parley.MaxIDLen
	const envelope = 16 << 10 // ids, times, channel, turn fields, escaped
	return 2*6*l.MaxTextBytes + 6*(l.MaxMessageBytes-min(l.MaxTextBytes, l.MaxMessageBytes)) + l.MaxParts*perPart + envelope
}

// Env is what a decision depends on besides state and command.
type Env struct {
	Now    time.Time
	Limits Limits
}

// Command is one of the command types below. Each says itself what it
// writes (decide, which Decide runs) and who may issue it (authorize,
// which Authorize runs): a new command is a type with these two methods.
type Command interface {
	// decide adds the command's events to d, or says why it is refused.
	decide(d *decider) error
	// authorize checks that the command's actor may issue it on s
	// (EFORBIDDEN), before decide.
	authorize(s State) error
}

// Actor is who issues a command: the agent the token binds (or the body names,
// for admins) and whether it acts with admin rights.
type Actor struct {
	AgentID string
	Admin   bool
}

// Prior is the stored result of an earlier write with the same client request id.
type Prior struct {
	RequestHash string
	Response    []byte
}

// ParentRef is what the rules need to know of the message replied to.
type ParentRef struct {
	ID     string
	TurnID string
	Depth  int
}

// Lookups are answers the engine reads from the store before deciding, so
// that the rules stay pure.
type Lookups struct {
	// Prior is the earlier write with the same ClientRequestID, if any.
	Prior *Prior
	// IDTaken is true if the id names a message or prompt of the
	// conversation, or once did (see Names).
	IDTaken bool
	// Parent is the message ReplyTo names, nil if it is not in the conversation.
	Parent *ParentRef
	// TurnIDKnown is true if an explicit TurnID names a message or turnId of the conversation.
	TurnIDKnown bool
}

// PostMessage writes one whole message.
type PostMessage struct {
	Actor
	ID              string
	Role            parley.Role
	Parts           []parley.Part
	ReplyTo         string
	TurnID          string
	Finality        parley.Finality
	Next            string
	Precondition    *parley.Precondition
	Channel         *parley.Channel
	Metadata        json.RawMessage
	ClientRequestID string
	RequestHash     string
	Known           Lookups
	// Streaming starts a message that is assembled from the chunks and tool
	// updates that follow: it has no parts yet and closes nothing.
	Streaming bool
	// RetryOf names the failed message this one retries (failover).
	RetryOf string
	// NeedsContent refuses a whole message that holds nothing (HasContent):
	// one a client posts. A runner may write an empty message to close its
	// turn, and a streamed answer may end empty.
	NeedsContent bool
	// prompt marks the message a dispatched prompt becomes: its id is the
	// prompt's own, not one more taken.
	prompt bool
}

// PostTrace writes a trace event: it follows the turn rules and never closes.
type PostTrace struct {
	Actor
	ID              string
	Payload         json.RawMessage
	TurnID          string
	Finality        parley.Finality
	Precondition    *parley.Precondition
	ClientRequestID string
	RequestHash     string
	Known           Lookups
}

// ClaimTurn claims the next turn. ExpectTurn, if not zero, must be that turn.
type ClaimTurn struct {
	Actor
	ExpectTurn int
	TTL        time.Duration
}

// ResetTurn resets the actor's open turn; with Claim it claims the next turn
// when the actor owns no open turn (resetAndClaim).
type ResetTurn struct {
	Actor
	Claim bool
	TTL   time.Duration
}

// MaxReasonBytes bounds the reason an abort gives.
const MaxReasonBytes = 1024

// AbortTurn closes the actor's open turn with a tombstone. Its reason is
// at most MaxReasonBytes (the API refuses more).
type AbortTurn struct {
	Actor
	Reason string
}

// Delegate lets another agent write into the actor's open turn.
type Delegate struct {
	Actor
	To string
}

// ExpireClaim writes claim.expired if the claim has lapsed at Env.Now.
type ExpireClaim struct{}

func (c PostMessage) decide(d *decider) error { return d.postMessage(c) }
func (c PostTrace) decide(d *decider) error   { return d.postTrace(c) }
func (c ClaimTurn) decide(d *decider) error   { return d.claim(c.Actor, c.ExpectTurn, c.TTL) }
func (c ResetTurn) decide(d *decider) error   { return d.reset(c) }
func (c AbortTurn) decide(d *decider) error   { return d.abort(c) }
func (c Delegate) decide(d *decider) error    { return d.delegate(c) }

// ExpireClaim decides nothing of its own: Decide expires a lapsed claim
// first, whatever the command.
func (ExpireClaim) decide(*decider) error { return nil }

func (c Revert) decide(d *decider) error          { return d.revert(c) }
func (c StreamText) decide(d *decider) error      { return d.streamText(c) }
func (c StreamTool) decide(d *decider) error      { return d.streamTool(c) }
func (c FinalizeMessage) decide(d *decider) error { return d.finalize(c) }

// Decision is what Decide returns for an accepted command.
type Decision struct {
	// Events to append, with seqs following the state's LastSeq.
	Events []parley.Event
	// Messages to write to the messages projection with the events.
	Messages []*parley.Message
	// Removed are the ids of messages whose rows go (a revert).
	Removed []string
	// Deliveries are channel auto-replies to write to the outbox.
	Deliveries []*parley.Delivery
	// Task advances a scheduled task with this decision (a firing).
	Task *parley.TaskAdvance
	// Replay is the stored response of an idempotent retry; nothing is written.
	Replay []byte
	// Result says what happened, for the caller.
	Result Result
}

// Result is the outcome of a command beyond its events.
type Result struct {
	// Turn is the turn the command wrote to, reset, claimed or answers with.
	Turn int `json:"turn"`
	// WasReset is true if the actor's open turn is (now) reset.
	WasReset bool `json:"wasReset"`
	// Claimed is true if the actor holds the turn or a claim on it.
	Claimed bool `json:"claimed"`
	// Claim is the claim held after the command, if any.
	Claim *parley.Claim `json:"claim,omitempty"`
	// Seq is the seq of the event that records the outcome (0 if nothing was written).
	Seq int64 `json:"seq"`
	// Message is the message written by PostMessage.
	Message *parley.Message `json:"-"`
	// EndedPrompt is the prompt the command ended (complete, or canceled
	// by its runner's aborted), if any.
	EndedPrompt string `json:"-"`
}
