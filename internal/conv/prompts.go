package conv

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/parleyhq/parley"
)

// The prompt queue: prompts wait in a conversation's queue and
// are dispatched one at a time to a runner. Dispatching writes the prompt as
// a user message (which opens and closes the asker's turn), so the runner's
// response replies to it and takes its id as turnId. The queue lives in the
// state; the prompts' text stays in their prompt.queued events.

// Prompt modes.
const (
	ModeFollowup = "followup" // FIFO
	ModeSteer    = "steer"    // to the front; the active response is aborted if its asker may stop it
	ModeCollect  = "collect"  // merged with the previous collect prompt within the window
	ModeReject   = "reject"   // refused while the queue is busy
)

// Why a prompt was aborted or canceled (the reason of prompt.aborted and
// prompt.canceled events).
const (
	ReasonSteered   = "steered"   // a steer prompt took its place
	ReasonStopped   = "stopped"   // someone stopped its answer
	ReasonReverted  = "reverted"  // its answer (or its own message) was reverted
	ReasonAborted   = "aborted"   // its runner answered it with aborted (or a canceled finalize)
	ReasonWithdrawn = "withdrawn" // its asker took it back before it was dispatched
	// ReasonTurnAborted: the turn its runner answered in was aborted by
	// someone else (an admin's turns/abort).
	ReasonTurnAborted = "turn_aborted"
)

// promptEvent reads the data of any prompt event: the fields of all of
// them, so that a replay can tell one that carries more than its type
// does. The rules write each type's own (parley.PromptQueued, …).
type promptEvent struct {
	parley.PromptQueued
	Runner string `json:"runner,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EnqueuePrompt adds a prompt to the queue.
type EnqueuePrompt struct {
	Actor
	ID      string
	Content string
	Mode    string
	To      string
	Channel *parley.Channel
	// Window is how long a collect prompt waits for more.
	Window time.Duration
	// ClientRequestID and RequestHash make a retry idempotent, as for
	// PostMessage: the same key and body return the original result.
	ClientRequestID string
	RequestHash     string
	// Known: an earlier write with the same key (Lookups.Prior), and
	// whether the id is taken (Lookups.IDTaken).
	Known Lookups
}

// DispatchPrompt hands the next ready prompt to Runner, if the queue is not
// busy and no other agent holds the floor. Content is the prompt's text,
// read by the engine from its events (NextPrompt says which).
type DispatchPrompt struct {
	Runner  string
	Content string
}

// CompletePrompt ends the prompt dispatched to the actor: complete, or
// canceled when Aborted (the runner answered it with aborted). With ID set
// it ends only that prompt, so that a late complete for a prompt that has
// already ended can never end the next one.
type CompletePrompt struct {
	Actor
	ID      string
	Aborted bool
}

// AbortPrompt aborts the prompt being answered (a stop): it is marked
// aborted, and the engine tells its runner to stop. Reason says why
// (ReasonStopped when empty).
type AbortPrompt struct {
	Actor
	Reason string
	// ID, if set, is the prompt whose answer is meant: it is stopped only
	// if it is the one being answered (else ENOTANSWERING, naming the one
	// being answered, if any).
	ID string
}

// RequeuePrompt puts the prompt dispatched to Runner back at the front.
type RequeuePrompt struct {
	Runner string
	// ID, if set, requeues only that prompt: the one a departed connection
	// of the runner was given, which may have been answered since.
	ID string
}

// WithdrawPrompt removes a waiting prompt.
type WithdrawPrompt struct {
	Actor
	ID string
}

// PromotePrompt moves a waiting prompt to the front.
type PromotePrompt struct {
	Actor
	ID string
}

func (c EnqueuePrompt) decide(d *decider) error  { return d.enqueue(c) }
func (c DispatchPrompt) decide(d *decider) error { return d.dispatch(c) }
func (c CompletePrompt) decide(d *decider) error { return d.complete(c) }
func (c RequeuePrompt) decide(d *decider) error  { return d.requeue(c) }
func (c WithdrawPrompt) decide(d *decider) error { return d.withdraw(c) }
func (c PromotePrompt) decide(d *decider) error  { return d.promote(c) }
func (c AbortPrompt) decide(d *decider) error    { return d.abortPrompt(c) }

// Answering returns the prompt being answered (dispatched) and the id of
// the message streaming its answer: its runner's message of the prompt's
// exchange, the latest if several; "" for none.
func (s State) Answering() (promptID, messageID string) {
	a := s.Active()
	if a == nil {
		return "", ""
	}
	var at int64
	for id, st := range s.Streams.All() {
		if st.AgentID == a.Runner && st.TurnID == a.Exchange() && st.RowSeq >= at {
			messageID, at = id, st.RowSeq
		}
	}
	return a.ID, messageID
}

// nullable is s, or nil (JSON null) when it is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// answeringNow says in words what Answering says.
func (s State) answeringNow() string {
	switch p, m := s.Answering(); {
	case p == "":
		return "no prompt is being answered"
	case m == "":
		return "prompt " + p + " is being answered, with no message streaming"
	default:
		return "prompt " + p + " is being answered, in message " + m
	}
}

// Active returns the dispatched prompt, if any.
func (s State) Active() *parley.QueuedPrompt {
	for i := range s.Queue {
		if s.Queue[i].Runner != "" {
			return &s.Queue[i]
		}
	}
	return nil
}

// NextPrompt returns the prompt next in line for runner at now, or nil:
// none while one is dispatched, and a collect prompt only after its window.
// DispatchPrompt hands it over only if its message may be written now
// (Dispatchable).
func (s State) NextPrompt(runner string, now time.Time) *parley.QueuedPrompt {
	if s.Active() != nil || s.Closed {
		return nil
	}
	for i := range s.Queue {
		p := &s.Queue[i]
		if p.To != "" && p.To != runner {
			continue
		}
		if p.Mode == ModeCollect && now.Before(p.Until.Time) {
			return nil // the head is still collecting: keep the order
		}
		return p
	}
	return nil
}

func (d *decider) enqueue(c EnqueuePrompt) error {
	if replay, err := d.idempotent(c.ClientRequestID, c.RequestHash, c.Known.Prior); replay {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	mode := c.Mode
	if mode == "" {
		mode = ModeFollowup
	}
	if err := checkPrompt(c.ID, mode, c.Content, c.To, c.Channel, d.env.Limits); err != nil {
		return err
	}
	if mode == ModeReject && len(d.s.Queue) > 0 {
		return d.conflict(parley.EBUSY, "the conversation is busy with %d prompt(s); mode reject refuses to queue", len(d.s.Queue))
	}
	if err := d.taken("prompt", c.ID, c.Known.IDTaken); err != nil {
		return err
	}
	if n, limit, ok := d.queueRoom(); !ok {
		return parley.Errorf(parley.EBUSY, "the prompt queue of conversation %s is full: it holds %d prompts, the most it may; queue again once some are answered or withdrawn",
			d.s.Conversation.ID, n).With("queueLength", n).With("maxQueueLength", limit).WithHead(d.base.Head(d.env.Now))
	}
	ev := parley.PromptQueued{ID: c.ID, Content: c.Content, Mode: mode, To: c.To, Channel: c.Channel}
	if mode == ModeCollect {
		ev.Until = parley.NewTime(d.env.Now.Add(c.Window))
		if n := len(d.s.Queue); n > 0 {
			last := d.s.Queue[n-1]
			// Merged, the texts are joined by a blank line; a merge that
			// would make the prompt's message too large starts a new prompt
			// (the message could never be written, and the queue would wait
			// behind it for ever).
			fits := last.Bytes+2+len(c.Content) <= d.env.Limits.MaxTextBytes
			if last.Mode == ModeCollect && last.Runner == "" && last.AgentID == c.AgentID && d.env.Now.Before(last.Until.Time) && fits {
				ev.Into = last.ID // merged into the prompt still collecting
			}
		}
	}
	e := d.emit(parley.EventPromptQueued, 0, "", c.AgentID, parley.FinalityNone, ev)
	d.out.Result = Result{Seq: e.Seq}
	if mode == ModeSteer && d.base.MayStop(c.Actor) {
		// The steer goes next; the prompt being answered is aborted and
		// never dispatched again, if its asker may stop it (see MayStop).
		// Otherwise the steer waits for that answer to end, first in line.
		d.abortActive(c.AgentID, ReasonSteered)
	}
	return nil
}

// checkPrompt refuses a prompt that is not one: a bad id, mode, addressee
// or channel, no content or too much.
func checkPrompt(id, mode, content, to string, ch *parley.Channel, l Limits) error {
	switch {
	case !parley.ValidID(id):
		return parley.Errorf(parley.EINVALIDVALUE, "prompt id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", id)
	case mode != ModeFollowup && mode != ModeSteer && mode != ModeCollect && mode != ModeReject:
		return parley.Errorf(parley.EINVALIDVALUE, "mode %q is not one of followup, steer, collect, reject", mode)
	case content == "":
		return parley.Errorf(parley.EINVALIDVALUE, "a prompt needs content")
	case len(content) > l.MaxTextBytes:
		return parley.Errorf(parley.ETOOLARGE, "the prompt is %d bytes; the limit is %d", len(content), l.MaxTextBytes)
	case to != "" && !parley.ValidID(to):
		return parley.Errorf(parley.EINVALIDVALUE, "to %q is not a valid agent id", to)
	}
	// The prompt becomes a message from its channel: one the rules would
	// refuse could never be dispatched, and the queue would wait behind it.
	return checkChannel(ch)
}

// queueRoom reports whether the queue may take one more prompt, with its
// length (a collect prompt counting once per prompt merged into it) and
// its limit.
func (d *decider) queueRoom() (n, limit int, ok bool) {
	limit = d.env.Limits.MaxQueuedPrompts
	if limit <= 0 {
		limit = DefaultLimits.MaxQueuedPrompts
	}
	for _, p := range d.s.Queue {
		n += len(p.Parts)
	}
	return n, limit, n < limit
}

// abortActive marks the prompt being answered aborted, unless it is already;
// it reports whether there is one.
func (d *decider) abortActive(agent, reason string) bool {
	a := d.s.Active()
	if a == nil {
		return false
	}
	if !a.Aborted {
		d.emit(parley.EventPromptAborted, 0, "", agent, parley.FinalityNone, parley.PromptAborted{ID: a.ID, Runner: a.Runner, Reason: reason})
		// The answer stops: what it asked a person is asked no more.
		d.cancelInputs(nil, a.Runner, 0, nil, agent, reason)
	}
	return true
}

// abortOwnersPrompt aborts the prompt being answered by owner, whose turn
// by carries away: the runner is told to stop (as by a stop), its message
// ends canceled and the prompt canceled. A runner that aborts its own turn
// knows it already (it ends its prompt itself).
func (d *decider) abortOwnersPrompt(owner, by string) {
	if a := d.s.Active(); a != nil && a.Runner == owner && by != owner {
		d.abortActive(by, ReasonTurnAborted)
		d.out.Result.Seq = d.s.LastSeq
	}
}

func (d *decider) abortPrompt(c AbortPrompt) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	reason := c.Reason
	if reason == "" {
		reason = ReasonStopped
	}
	if a := d.s.Active(); c.ID != "" && (a == nil || a.ID != c.ID) {
		err := parley.Errorf(parley.ENOTANSWERING, "prompt %s is not being answered in conversation %s (%s); nothing was stopped",
			c.ID, d.s.Conversation.ID, d.s.answeringNow()).WithHead(d.base.Head(d.env.Now))
		if p, m := d.s.Answering(); p != "" {
			return err.With("answering", map[string]any{"promptId": p, "messageId": nullable(m)})
		}
		return err.With("answering", nil)
	}
	if !d.abortActive(c.AgentID, reason) {
		return parley.Errorf(parley.ENOTFOUND, "no prompt is being answered in conversation %s", d.s.Conversation.ID)
	}
	d.out.Result = Result{Seq: d.s.LastSeq}
	return nil
}

// endPrompt ends the prompt a that its runner answered: complete, or
// canceled when the answer was aborted. The result names the prompt.
func (d *decider) endPrompt(a *parley.QueuedPrompt, runner string, aborted bool) {
	id := a.ID
	if aborted {
		d.emit(parley.EventPromptCanceled, 0, "", runner, parley.FinalityNone, parley.PromptCanceled{ID: id, Reason: ReasonAborted})
	} else {
		d.emit(parley.EventPromptCompleted, 0, "", runner, parley.FinalityNone, parley.PromptCompleted{ID: id})
	}
	d.out.Result.EndedPrompt = id
}

// Dispatchable reports whether DispatchPrompt would hand runner a prompt
// now: one is next in line (NextPrompt) and its message may be written, no
// other agent holding the floor. Runners ask before they have the engine
// dispatch, which reads the prompt's text: a prompt that waits behind a
// streaming message is asked about at each of its deltas.
func Dispatchable(s State, runner string, env Env) bool {
	if s.NextPrompt(runner, env.Now) == nil {
		return false
	}
	d, err := Decide(s, DispatchPrompt{Runner: runner}, env)
	return err == nil && slices.ContainsFunc(d.Events, func(e parley.Event) bool { return e.Type == parley.EventPromptDispatched })
}

func (d *decider) dispatch(c DispatchPrompt) error {
	p := d.s.NextPrompt(c.Runner, d.env.Now)
	if p == nil || !floorFree(d.s, c.Runner, p.AgentID) {
		return nil // nothing ready, or another agent holds the floor
	}
	id, written, asker, channel, turnID := p.ID, p.Written, p.AgentID, p.Channel, p.TurnID
	if !written {
		// The prompt becomes a user message: the asker's turn, opened and
		// closed; a task's prompt belongs to the task run's exchange.
		err := d.postMessage(PostMessage{Actor: Actor{AgentID: asker}, ID: id, prompt: true, Role: parley.RoleUser,
			Parts: []parley.Part{{Type: parley.PartText, Text: c.Content}}, Finality: parley.FinalityTurn, Channel: channel,
			TurnID: turnID, Known: Lookups{TurnIDKnown: turnID != ""}})
		if err != nil {
			d.out = Decision{}
			return nil // the floor is not free (a claim, say): try again later
		}
	}
	e := d.emit(parley.EventPromptDispatched, 0, "", c.Runner, parley.FinalityNone, parley.PromptDispatched{ID: id, Runner: c.Runner})
	d.out.Result = Result{Seq: e.Seq, Message: d.out.Result.Message}
	return nil
}

// floorFree reports whether a prompt of asker may be dispatched to runner
// as far as the open turn goes: none is open, or the runner or the asker
// owns it. The asker's own open turn never holds its prompt back: the
// prompt's message is written into that turn and closes it, as if the
// asker had finalized it.
func floorFree(s State, runner, asker string) bool {
	return s.Open == nil || s.Open.Owner == runner || s.Open.Owner == asker
}

func (d *decider) complete(c CompletePrompt) error {
	a := d.s.Active()
	if a == nil || a.Runner != c.AgentID || c.ID != "" && a.ID != c.ID || d.s.Closed {
		// Nothing dispatched to this runner (a repeated complete does
		// nothing), another prompt than the one named, or the conversation
		// is closed and takes no more events.
		return nil
	}
	d.endPrompt(a, c.AgentID, c.Aborted || a.Aborted)
	d.out.Result.Seq = d.s.LastSeq
	return nil
}

func (d *decider) requeue(c RequeuePrompt) error {
	a := d.s.Active()
	if a == nil || a.Runner != c.Runner || c.ID != "" && a.ID != c.ID || d.s.Closed {
		return nil // nothing to put back, or closed: nothing is dispatched again
	}
	if a.Aborted {
		// Its runner left without answering the abort: the prompt ends;
		// someone had asked for it to stop.
		d.endPrompt(a, c.Runner, true)
		d.out.Result.Seq = d.s.LastSeq
		return nil
	}
	e := d.emit(parley.EventPromptRequeued, 0, "", c.Runner, parley.FinalityNone, parley.PromptRequeued{ID: a.ID})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

// waiting checks that a prompt is in the queue and not being answered, in a
// conversation that is still open (a closed one takes no more events).
func (d *decider) waiting(id string) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	i := slices.IndexFunc(d.s.Queue, func(p parley.QueuedPrompt) bool { return p.ID == id })
	switch {
	case i < 0:
		return parley.Errorf(parley.ENOTFOUND, "prompt %s is not in the queue", id)
	case d.s.Queue[i].Runner != "":
		return d.conflict(parley.EBUSY, "prompt %s is being answered; abort it instead", id)
	}
	return nil
}

func (d *decider) withdraw(c WithdrawPrompt) error {
	if err := d.waiting(c.ID); err != nil {
		return err
	}
	e := d.emit(parley.EventPromptCanceled, 0, "", c.AgentID, parley.FinalityNone, parley.PromptCanceled{ID: c.ID, Reason: ReasonWithdrawn})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

func (d *decider) promote(c PromotePrompt) error {
	if err := d.waiting(c.ID); err != nil {
		return err
	}
	e := d.emit(parley.EventPromptPromoted, 0, "", c.AgentID, parley.FinalityNone, parley.PromptPromoted{ID: c.ID})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

// applyPrompt keeps the queue of s up to date with one event.
func applyPrompt(s State, e parley.Event) State {
	var p promptEvent
	if json.Unmarshal(e.Data, &p) != nil {
		return s
	}
	q := slices.Clone(s.Queue)
	i := slices.IndexFunc(q, func(x parley.QueuedPrompt) bool { return x.ID == p.ID || (p.Into != "" && x.ID == p.Into) })
	switch e.Type {
	case parley.EventPromptQueued:
		if p.Into != "" && i >= 0 {
			q[i].Parts = append(slices.Clone(q[i].Parts), e.Seq)
			q[i].Until = p.Until
			q[i].Bytes += 2 + len(p.Content)
			break
		}
		np := parley.QueuedPrompt{ID: p.ID, Mode: p.Mode, AgentID: e.AgentID, To: p.To, Channel: p.Channel, Parts: []int64{e.Seq}, Until: p.Until, TurnID: p.TurnID, Bytes: len(p.Content)}
		if p.Mode == ModeSteer {
			q = slices.Insert(q, firstWaiting(q), np)
		} else {
			q = append(q, np)
		}
	case parley.EventPromptDispatched:
		if i >= 0 {
			q[i].Runner, q[i].Written = p.Runner, true
		}
	case parley.EventPromptAborted:
		if i >= 0 {
			q[i].Aborted = true
		}
	case parley.EventPromptCompleted, parley.EventPromptCanceled:
		if i >= 0 {
			s.Ended = rememberEnded(s.Ended, q[i], e, p.Reason)
			q = slices.Delete(q, i, i+1)
		}
	case parley.EventPromptRequeued, parley.EventPromptPromoted:
		if i >= 0 {
			x := q[i]
			x.Runner = ""
			q = slices.Delete(q, i, i+1)
			q = slices.Insert(q, firstWaiting(q), x)
		}
	}
	if len(q) == 0 {
		q = nil
	}
	s.Queue = q
	return s
}

// firstWaiting is the index of the first prompt not dispatched.
func firstWaiting(q []parley.QueuedPrompt) int {
	for i, p := range q {
		if p.Runner == "" {
			return i
		}
	}
	return len(q)
}

// EventTaskRun records one firing of a scheduled task (parley.EventTaskRun).
const EventTaskRun = parley.EventTaskRun

// RunTask records a firing of a scheduled task and queues its prompt. Due is
// false when the task no longer runs at Task.NextRunAt (it fired already):
// then nothing is written. While the prompt queue is full the firing is
// skipped: the decision only moves the task to Next (Decision.Task, no
// events).
type RunTask struct {
	Task     parley.Task
	RunID    string
	PromptID string
	Next     parley.Time
	Due      bool
}

func (c RunTask) decide(d *decider) error { return d.runTask(c) }

func (d *decider) runTask(c RunTask) error {
	if !c.Due || d.s.Closed {
		return nil
	}
	advance := &parley.TaskAdvance{TaskID: c.Task.ID, From: c.Task.NextRunAt, To: c.Next}
	if _, _, ok := d.queueRoom(); !ok {
		// The queue is full: this firing is skipped, and the task moves on
		// to its next run without writing an event.
		d.out.Task = advance
		return nil
	}
	d.emit(EventTaskRun, 0, c.RunID, c.Task.AgentID, parley.FinalityNone, map[string]string{"taskId": c.Task.ID, "runId": c.RunID})
	e := d.emit(parley.EventPromptQueued, 0, c.RunID, c.Task.AgentID, parley.FinalityNone, parley.PromptQueued{ID: c.PromptID, Content: c.Task.Prompt, Mode: ModeFollowup, TurnID: c.RunID})
	d.out.Task = advance
	d.out.Result = Result{Seq: e.Seq}
	return nil
}
