package conv

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/parleyhq/parley"
)

// Replaying a log that Decide did not write. An import writes a
// conversation's history as a file gives it: events that no command here
// produced. A Replay holds each of them to the bounds Decide holds every
// live write to, with the same checks where there is a command to check
// (a message's shape and size, a trace's payload, a claim's TTL, a prompt,
// a tool update, text streamed in a v1 conversation) and with the bounds
// the rules keep over a conversation's state (its turns, which only grow,
// one at a time; the messages streaming at once; the prompt queue's
// length; the collect window; the size of a streaming message as it
// grows), and folds them with Evolve. So an imported conversation holds no
// more than one written live may: whatever the next live write finds,
// every bound already holds.

// ClockSkew is how far past the importing server's clock an imported time
// may be (the clocks of the server that exported it and of this one may
// differ by that much).
const ClockSkew = time.Minute

// ReplayEnv is what a replay depends on: the limits, the importing
// server's clock, and two bounds the engine holds rather than the rules.
type ReplayEnv struct {
	Env
	// CollectWindow is how long a collect prompt collects (engine's -collect-window).
	CollectWindow time.Duration
	// MaxRemoved bounds the messages one revert removes (engine's MaxRevert).
	MaxRemoved int
}

// Replay folds events decided elsewhere into a state, checking each first.
type Replay struct {
	s   State
	env ReplayEnv
	// streams are the messages streaming, as their events assemble them,
	// by id: what a chunk or tool update adds to is measured on them.
	streams map[string]*parley.Message
	// msg is the message of the event being added, if it carries one.
	msg *parley.Message
}

// NewReplay starts a replay after state s (a conversation just created:
// its conversation.created is not replayed).
func NewReplay(s State, env ReplayEnv) *Replay {
	if env.Limits == (Limits{}) {
		env.Limits = DefaultLimits
	}
	return &Replay{s: s, env: env, streams: map[string]*parley.Message{}}
}

// State is the state after the events added so far.
func (r *Replay) State() State { return r.s }

// Add checks event e, which must follow the events added so far, and folds
// it. The data of every event but a message or message.updated is made
// what the server writes for it (the fields it knows, compact): e.Data may
// change. It returns EINVALID, EINVALIDVALUE, EINVALIDTHREAD or ETOOLARGE,
// as a live write would get, saying what is wrong; after an error the
// replay is not to be used again.
func (r *Replay) Add(e *parley.Event) error {
	if err := r.checkHead(e); err != nil {
		return err
	}
	r.msg = nil
	data, err := r.checkData(e)
	if err != nil {
		return err
	}
	if data != nil {
		e.Data = data
	}
	if err := checkStorable([]parley.Event{*e}); err != nil {
		return err
	}
	r.s = Evolve(r.s, *e)
	r.track(e)
	return nil
}

// CheckRow checks a message row that goes with the events replayed (an
// imported row, which a reader gets as it is): CheckMessage's checks, and
// within the log: its seqs and turn within those of the events, its times
// not in the server's future, and streaming if and only if the log
// leaves it streaming.
func (r *Replay) CheckRow(m *parley.Message) error {
	if err := CheckMessage(m, r.env.Limits); err != nil {
		return err
	}
	s := r.s
	_, streams := s.Streams.Get(m.ID)
	future := r.env.Now.Add(ClockSkew)
	switch {
	case m.Seq > s.LastSeq || m.UpdatedSeq > s.LastSeq:
		return parley.Errorf(parley.EINVALIDVALUE, "seq %d and updatedSeq %d are not within the log (%d)", m.Seq, m.UpdatedSeq, s.LastSeq)
	case m.Turn > s.LastTurn:
		return parley.Errorf(parley.EINVALIDVALUE, "turn %d is after the log's last turn (%d)", m.Turn, s.LastTurn)
	case m.CreatedAt.After(future) || m.UpdatedAt.After(future):
		return parley.Errorf(parley.EINVALIDVALUE, "createdAt %s or updatedAt %s is in this server's future", m.CreatedAt.Format(parley.TimeLayout), m.UpdatedAt.Format(parley.TimeLayout))
	case (m.Status == parley.StatusStreaming) != streams:
		return parley.Errorf(parley.EINVALIDVALUE, "status %s, but the log leaves it %s", m.Status, map[bool]string{true: "streaming", false: "not streaming"}[streams])
	}
	return nil
}

// checkHead checks what every event carries besides its data.
func (r *Replay) checkHead(e *parley.Event) error {
	s, l := r.s, r.env.Limits
	switch {
	case e.Seq != s.LastSeq+1:
		return parley.Errorf(parley.EINVALID, "seq %d where %d comes next", e.Seq, s.LastSeq+1)
	case s.Closed:
		return parley.Errorf(parley.EINVALID, "the conversation closed at seq %d; nothing follows", s.LastClosedSeq)
	case !e.Finality.Valid():
		return parley.Errorf(parley.EINVALIDVALUE, "finality %q is not one of none, turn, conversation", e.Finality)
	case e.AgentID != "" && !parley.ValidID(e.AgentID):
		return parley.Errorf(parley.EINVALIDVALUE, "agent id %q is not a valid id", e.AgentID)
	case e.TurnID != "" && !parley.ValidID(e.TurnID):
		return parley.Errorf(parley.EINVALIDVALUE, "turnId %q is not a valid id", e.TurnID)
	case e.Turn < 0 || e.Turn > s.LastTurn+1:
		// Turns only grow, one at a time: the next write's turn never wraps.
		return parley.Errorf(parley.EINVALIDVALUE, "turn %d: after turn %d an event is in turn 0 to %d", e.Turn, s.LastTurn, s.LastTurn+1)
	case e.Time.After(r.env.Now.Add(ClockSkew)):
		return parley.Errorf(parley.EINVALIDVALUE, "time %s is in this server's future", e.Time.Format(parley.TimeLayout))
	case len(e.Data) > l.MaxMessageJSON():
		return parley.Errorf(parley.ETOOLARGE, "its data is %d bytes; the limit is %d", len(e.Data), l.MaxMessageJSON())
	}
	return nil
}

// checkData checks an event's data against the state before it, and
// returns the data the server writes for it (nil: keep e.Data).
func (r *Replay) checkData(e *parley.Event) ([]byte, error) {
	switch e.Type {
	case parley.EventMessage, parley.EventMessageUpdated:
		return nil, r.message(e)
	case parley.EventChunk:
		return r.chunk(e)
	case parley.EventPartUpdated:
		return r.toolUpdate(e)
	case parley.EventTrace:
		return r.trace(e)
	case parley.EventTurnClaimed, parley.EventClaimExpired:
		return r.claim(e)
	case parley.EventTurnReset, parley.EventTurnAborted:
		var t parley.TurnRef
		if err := decode(e, &t); err != nil {
			return nil, err
		}
		if t.Turn != e.Turn {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "data names turn %d, the event turn %d", t.Turn, e.Turn)
		}
		return encode(t, checkReason(t.Reason))
	case parley.EventDelegation:
		return r.delegation(e)
	case parley.EventConversationUpdated:
		return r.updated(e)
	case parley.EventMessagesRemoved:
		return r.removed(e)
	case EventTaskRun:
		var t struct{ TaskID, RunID string }
		if err := decode(e, &t); err != nil {
			return nil, err
		}
		if !parley.ValidID(t.TaskID) || !parley.ValidID(t.RunID) {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "taskId %q and runId %q are not both valid ids", t.TaskID, t.RunID)
		}
		return encode(map[string]string{"taskId": t.TaskID, "runId": t.RunID}, nil)
	case parley.EventInputAnswered:
		return r.inputAnswered(e)
	case parley.EventInputAcked:
		return r.inputAcked(e)
	case parley.EventCompacted:
		if string(e.Data) != "{}" {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "a compacted event's data is {}")
		}
		return nil, nil
	}
	if queueEvents[e.Type] {
		return r.prompt(e)
	}
	return nil, parley.Errorf(parley.EINVALIDVALUE, "type %q cannot be replayed", e.Type)
}

// trace checks a trace event: a valid id if any, JSON, no finality, and
// within the size of a trace.
func (r *Replay) trace(e *parley.Event) ([]byte, error) {
	var t parley.Trace
	if err := decode(e, &t); err != nil {
		return nil, err
	}
	switch {
	case t.ID != "" && !parley.ValidID(t.ID):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "trace id %q is not a valid id", t.ID)
	case len(t.Payload) > 0 && !json.Valid(t.Payload):
		return nil, parley.Errorf(parley.EINVALID, "payload is not valid JSON")
	case e.Finality != parley.FinalityNone:
		return nil, parley.Errorf(parley.EINVALID, "a trace cannot have finality %q", e.Finality)
	}
	return encode(t, traceTooLarge(t.Payload, r.env.Limits))
}

// delegation checks a delegation event: two agents, in the event's turn,
// within the turn's bound of delegates.
func (r *Replay) delegation(e *parley.Event) ([]byte, error) {
	var d parley.Delegation
	if err := decode(e, &d); err != nil {
		return nil, err
	}
	if !parley.ValidID(d.From) || !parley.ValidID(d.To) || d.Turn != e.Turn {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "delegation from %q to %q in turn %d: two agent ids, in the event's turn (%d)", d.From, d.To, d.Turn, e.Turn)
	}
	var err error
	if open := r.s.Open; open != nil && open.Owner != d.To && !slices.Contains(open.Delegates, d.To) && len(open.Delegates) >= maxDelegates(r.env.Limits) {
		err = parley.Errorf(parley.ETOOLARGE, "turn %d would have %d delegates; the limit is %d", open.Turn, len(open.Delegates)+1, maxDelegates(r.env.Limits))
	}
	return encode(d, err)
}

// removed checks a messages.removed event: 1 to MaxRemoved valid ids.
func (r *Replay) removed(e *parley.Event) ([]byte, error) {
	var m parley.MessagesRemoved
	if err := decode(e, &m); err != nil {
		return nil, err
	}
	if n := len(m.MessageIDs); n == 0 || r.env.MaxRemoved > 0 && n > r.env.MaxRemoved {
		return nil, parley.Errorf(parley.ETOOLARGE, "a revert removes 1 to %d messages, not %d", r.env.MaxRemoved, n)
	}
	if i := slices.IndexFunc(m.MessageIDs, func(id string) bool { return !parley.ValidID(id) }); i >= 0 {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "messageIds[%d] %q is not a valid id", i, m.MessageIDs[i])
	}
	return encode(m, nil)
}

// inputAcked checks an input.acked event: it acknowledges the outcome of
// a request of that message.
func (r *Replay) inputAcked(e *parley.Event) ([]byte, error) {
	var a parley.InputAcked
	if err := decode(e, &a); err != nil {
		return nil, err
	}
	if in, ok := r.s.Inputs[a.RequestID]; !ok || in.Status == parley.InputStatusPending || in.MessageID != a.MessageID {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "input request %q has no outcome to acknowledge in message %q", a.RequestID, a.MessageID)
	}
	return encode(a, nil)
}

// message checks a message or message.updated event: its message, and
// room for it to stream.
func (r *Replay) message(e *parley.Event) error {
	var m parley.Message
	if err := decode(e, &m); err != nil {
		return err
	}
	r.msg = &m
	if err := CheckMessage(&m, r.env.Limits); err != nil {
		return err
	}
	switch {
	case m.Turn != e.Turn || m.AgentID != e.AgentID:
		return parley.Errorf(parley.EINVALIDVALUE, "message %s is %s's in turn %d, its event %s's in turn %d", m.ID, m.AgentID, m.Turn, e.AgentID, e.Turn)
	case e.Type == parley.EventMessage && m.Seq != e.Seq:
		return parley.Errorf(parley.EINVALIDVALUE, "message %s has seq %d, its event %d", m.ID, m.Seq, e.Seq)
	}
	_, streaming := r.streams[m.ID]
	if n, max := r.s.Streams.Len(), r.env.Limits.MaxStreaming; m.Status == parley.StatusStreaming && !streaming && n >= max {
		return parley.Errorf(parley.ETOOLARGE, "message %s would be one more streaming at once than the %d there may be", m.ID, max).With("maxStreaming", max)
	}
	return nil
}

// chunk checks a chunk event: text added to a streaming message, which
// must stay within its bounds, or (in a v1 conversation) text that no
// message holds yet.
func (r *Replay) chunk(e *parley.Event) ([]byte, error) {
	c, err := parley.ParseChunk(e.Data)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALID, "data: %v", err)
	}
	if c.MessageID == "" {
		if f := r.s.Conversation.MessageFormat; f != "v1" {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "a chunk that names no message is for conversations made with messageFormat v1; this one is %s", f)
		}
		return encoded(c.AppendJSON(nil), bound(v1Room(r.s, e.AgentID, len(c.Content), r.env.Limits)))
	}
	m, err := r.streaming(c.MessageID, e)
	if err != nil {
		return nil, err
	}
	if len(m.Content)+len(c.Content) > r.env.Limits.MaxTextBytes {
		return nil, parley.Errorf(parley.ETOOLARGE, "message %s would hold more than %d bytes of text", c.MessageID, r.env.Limits.MaxTextBytes)
	}
	return encoded(c.AppendJSON(nil), checkSize(c.MessageID, m.Size()+len(c.Content), r.env.Limits))
}

// toolUpdate checks a part.updated event: a change of a tool call of a
// streaming message, which must stay within its bounds.
func (r *Replay) toolUpdate(e *parley.Event) ([]byte, error) {
	var u parley.PartUpdate
	if err := decode(e, &u); err != nil {
		return nil, err
	}
	m, err := r.streaming(u.MessageID, e)
	if err != nil {
		return nil, err
	}
	if u.Part.Type == parley.PartInputRequest {
		if err := r.inputRequest(m, u.Part); err != nil {
			return nil, err
		}
	} else if err := checkToolUpdate(m, u.Part, r.env.Limits); err != nil {
		return nil, err
	}
	grown := *m
	grown.Parts = slices.Clone(m.Parts)
	grown.ApplyPart(u.Part)
	return encode(u, checkSize(m.ID, grown.Size(), r.env.Limits))
}

// streaming returns the streaming message that a chunk or tool update e
// adds to: it must stream, and be its writer's.
func (r *Replay) streaming(id string, e *parley.Event) (*parley.Message, error) {
	m, ok := r.streams[id]
	switch {
	case !ok:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "message %q is not streaming", id)
	case m.AgentID != e.AgentID:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "message %s is written by %s, not %s", id, m.AgentID, e.AgentID)
	}
	return m, nil
}

// claim checks a turn.claimed event (a claim on the next turn, for at most
// MaxClaimTTL) or a claim.expired one.
func (r *Replay) claim(e *parley.Event) ([]byte, error) {
	var c parley.Claim
	if err := decode(e, &c); err != nil {
		return nil, err
	}
	if !parley.ValidID(c.AgentID) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "the claim's agent id %q is not a valid id", c.AgentID)
	}
	if e.Type == parley.EventClaimExpired {
		return encode(c, nil)
	}
	if next := r.s.LastTurn + 1; c.Turn != next || e.Turn != next || r.s.Open != nil {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a claim on turn %d (event turn %d): only the next turn, %d, may be claimed, and only while no turn is open", c.Turn, e.Turn, next)
	}
	ttl, longest := c.ExpiresAt.Sub(e.Time.Time), r.env.Limits.MaxClaimTTL
	if ttl > longest && ttl <= longest+time.Millisecond {
		ttl = longest // times are kept to the millisecond: one may seem longer
	}
	return encode(c, checkTTL(ttl, r.env.Limits))
}

// prompt checks a prompt event: a prompt queued as EnqueuePrompt checks
// it, into a queue with room for it, collecting for at most the collect
// window; the other prompt events name a prompt and its runner.
func (r *Replay) prompt(e *parley.Event) ([]byte, error) {
	var p promptEvent
	if err := decode(e, &p); err != nil {
		return nil, err
	}
	if e.Type != parley.EventPromptQueued {
		switch {
		case !parley.ValidID(p.ID):
			return nil, parley.Errorf(parley.EINVALIDVALUE, "prompt id %q is not a valid id", p.ID)
		case p.Runner != "" && !parley.ValidID(p.Runner):
			return nil, parley.Errorf(parley.EINVALIDVALUE, "runner %q is not a valid agent id", p.Runner)
		case p.Content != "" || p.Into != "" || p.Mode != "" || p.To != "" || p.Channel != nil || p.TurnID != "" || !p.Until.IsZero():
			return nil, parley.Errorf(parley.EINVALIDVALUE, "a %s event names a prompt, its runner and a reason, no more", e.Type)
		}
		// Each is written as prompt.aborted's data is: its id, runner and
		// reason (those it has).
		return encode(parley.PromptAborted{ID: p.ID, Runner: p.Runner, Reason: p.Reason}, checkReason(p.Reason))
	}
	if err := checkPrompt(p.ID, p.Mode, p.Content, p.To, p.Channel, r.env.Limits); err != nil {
		return nil, err
	}
	switch {
	case p.TurnID != "" && !parley.ValidID(p.TurnID):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "turnId %q is not a valid id", p.TurnID)
	case p.Runner != "" || p.Reason != "":
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a queued prompt has no runner or reason yet")
	case p.Mode == ModeReject && len(r.s.Queue) > 0:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a prompt of mode reject is queued only into an empty queue")
	case p.Mode != ModeCollect && (!p.Until.IsZero() || p.Into != ""):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "only a collect prompt collects (until, into)")
	case p.Mode == ModeCollect && (p.Until.Before(e.Time.Time) || p.Until.Sub(e.Time.Time) > r.env.CollectWindow+time.Millisecond):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a collect prompt collects from its time for at most the collect window (%s), not until %s", r.env.CollectWindow, p.Until.Format(parley.TimeLayout))
	}
	if p.Into != "" {
		n := len(r.s.Queue)
		if n == 0 || !r.collects(r.s.Queue[n-1], p, e) {
			return nil, parley.Errorf(parley.EINVALIDVALUE, "prompt %s is merged into %s, which is not the last prompt of the queue, collecting for the same agent, with room for it", p.ID, p.Into)
		}
	}
	d := decider{s: r.s, env: r.env.Env}
	if n, limit, ok := d.queueRoom(); !ok {
		return nil, parley.Errorf(parley.ETOOLARGE, "the prompt queue would hold %d prompts; the limit is %d", n+1, limit).With("maxQueueLength", limit)
	}
	return encode(p.PromptQueued, nil)
}

// collects reports whether prompt p may be merged into last, the last
// prompt of the queue, as EnqueuePrompt merges it.
func (r *Replay) collects(last parley.QueuedPrompt, p promptEvent, e *parley.Event) bool {
	fits := last.Bytes+2+len(p.Content) <= r.env.Limits.MaxTextBytes
	return last.ID == p.Into && last.Mode == ModeCollect && last.Runner == "" && last.AgentID == e.AgentID && !e.Time.After(last.Until.Time) && fits
}

// track keeps the streaming messages assembled after event e was folded.
func (r *Replay) track(e *parley.Event) {
	switch e.Type {
	case parley.EventMessage, parley.EventMessageUpdated:
		if _, ok := r.s.Streams.Get(r.msg.ID); ok {
			r.streams[r.msg.ID] = r.msg
		}
	case parley.EventChunk:
		c, _ := parley.ParseChunk(e.Data)
		if m, ok := r.streams[c.MessageID]; ok {
			m.AppendText(c.Content)
		}
	case parley.EventPartUpdated:
		var u parley.PartUpdate
		_ = json.Unmarshal(e.Data, &u)
		if m, ok := r.streams[u.MessageID]; ok {
			m.ApplyPart(u.Part)
		}
	case parley.EventInputAnswered:
		var a parley.InputAnswered
		_ = json.Unmarshal(e.Data, &a)
		if m, ok := r.streams[a.MessageID]; ok {
			m.ApplyInputAnswered(a)
		}
	}
	maps.DeleteFunc(r.streams, func(id string, _ *parley.Message) bool {
		_, ok := r.s.Streams.Get(id)
		return !ok
	})
}

// decode reads an event's data into v.
func decode(e *parley.Event, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return parley.Errorf(parley.EINVALID, "data: %v", err)
	}
	return nil
}

// encode returns v as the server writes it, or err.
func encode(v any, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, parley.Errorf(parley.EINVALID, "data: %v", err)
	}
	return data, nil
}

// encoded returns data, or err.
func encoded(data []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return data, nil
}

// bound makes a refusal of one more at once (EBUSY: live, the writer waits
// for room) what it is in a replayed log: more than the bound allows.
func bound(err error) error {
	if pe, ok := err.(*parley.Error); ok && pe.Code == parley.EBUSY {
		return parley.Errorf(parley.ETOOLARGE, "%s", pe.Message)
	}
	return err
}

// inputRequest checks an input request that a part.updated event opens in
// streaming message m: as a runner's would be (but for its expiry, which
// may have passed since), pending, with an id the conversation never had.
func (r *Replay) inputRequest(m *parley.Message, p parley.Part) error {
	req := parley.InputRequest{RequestID: p.RequestID, Kind: p.Kind, ToolCallID: p.ToolCallID, ToolName: p.ToolName, Args: p.Args,
		Title: p.Title, Detail: p.Detail, Schema: p.Schema, Options: p.Options, Multiple: p.Multiple, Answerers: p.Answerers}
	if err := CheckInputRequest(req, time.Time{}); err != nil {
		return err
	}
	switch _, _, known := r.s.InputOf(p.RequestID); {
	case p.Status != parley.InputStatusPending || len(p.Answer) > 0 || p.AnsweredBy != "" || !p.AnsweredAt.IsZero() || p.Reason != "":
		return parley.Errorf(parley.EINVALIDVALUE, "input request %s opens pending, with no answer", p.RequestID)
	case known:
		return parley.Errorf(parley.EINVALIDVALUE, "input request %s is opened twice", p.RequestID)
	case len(m.Parts) >= r.env.Limits.MaxParts:
		return parley.Errorf(parley.ETOOLARGE, "message %s has %d parts; the limit is %d", m.ID, len(m.Parts), r.env.Limits.MaxParts)
	}
	return nil
}

// inputAnswered checks an input.answered event: it ends a pending request
// of a streaming message, answered with JSON of at most
// MaxInputAnswerBytes, or expired or canceled with no answer.
func (r *Replay) inputAnswered(e *parley.Event) ([]byte, error) {
	var a parley.InputAnswered
	if err := decode(e, &a); err != nil {
		return nil, err
	}
	in, ok := r.s.Inputs[a.RequestID]
	switch {
	case !ok || in.Status != parley.InputStatusPending || in.MessageID != a.MessageID:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "input request %q is not pending in message %q", a.RequestID, a.MessageID)
	case r.streams[a.MessageID] == nil:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "message %q is not streaming", a.MessageID)
	case a.Status == parley.InputStatusAnswered && (len(a.Answer) == 0 || len(a.Answer) > MaxInputAnswerBytes || !json.Valid(a.Answer)):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "the answer to input request %s is not JSON of at most %d bytes", a.RequestID, MaxInputAnswerBytes)
	case a.Status == parley.InputStatusAnswered && !parley.ValidID(a.AnsweredBy):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "an answer names who answered (answeredBy)")
	case (a.Status == parley.InputStatusExpired || a.Status == parley.InputStatusCanceled) && (len(a.Answer) > 0 || a.AnsweredBy != ""):
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a request that %s has no answer", a.Status)
	case a.Status != parley.InputStatusAnswered && a.Status != parley.InputStatusExpired && a.Status != parley.InputStatusCanceled:
		return nil, parley.Errorf(parley.EINVALIDVALUE, "status %q is not one of answered, expired, canceled", a.Status)
	case len(a.Reason) > MaxReasonBytes:
		return nil, parley.Errorf(parley.ETOOLARGE, "reason is at most %d bytes", MaxReasonBytes)
	}
	return encode(a, nil)
}
