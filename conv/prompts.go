package conv

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/parleyhq/parley"
)

// The prompt queue (seed 001): prompts wait in a conversation's queue and
// are dispatched one at a time to a runner. Dispatching writes the prompt as
// a user message (which opens and closes the asker's turn), so the runner's
// response replies to it and takes its id as turnId. The queue lives in the
// state; the prompts' text stays in their prompt.queued events.

// Prompt modes.
const (
	ModeFollowup = "followup" // FIFO
	ModeSteer    = "steer"    // to the front; the active response is aborted
	ModeCollect  = "collect"  // merged with the previous collect prompt within the window
	ModeReject   = "reject"   // refused while the queue is busy
)

// Prompt event types.
const (
	EventPromptQueued     = "prompt.queued"
	EventPromptDispatched = "prompt.dispatched"
	EventPromptCompleted  = "prompt.completed"
	EventPromptCanceled   = "prompt.canceled"
	EventPromptRequeued   = "prompt.requeued"
	EventPromptPromoted   = "prompt.promoted"
)

// QueuedPrompt is a prompt in the queue, waiting or dispatched.
type QueuedPrompt struct {
	ID      string          `json:"id"`
	Mode    string          `json:"mode"`
	AgentID string          `json:"agentId"`
	To      string          `json:"to,omitempty"`
	Channel *parley.Channel `json:"channel,omitempty"`
	// Parts are the seqs of the prompt.queued events that hold its text.
	Parts []int64 `json:"parts"`
	// Until is when a collect prompt stops collecting.
	Until parley.Time `json:"until"`
	// Runner is the agent it was dispatched to; empty while it waits.
	Runner string `json:"runner,omitempty"`
	// Written is true once its user message exists (it was dispatched before).
	Written bool `json:"written,omitempty"`
	// TurnID is the exchange its message starts: a task run's id, or empty
	// for the message's own id.
	TurnID string `json:"turnId,omitempty"`
}

// promptEvent is the data of the prompt events.
type promptEvent struct {
	ID      string          `json:"id"`
	Into    string          `json:"into,omitempty"`
	Content string          `json:"content,omitempty"`
	Mode    string          `json:"mode,omitempty"`
	To      string          `json:"to,omitempty"`
	Channel *parley.Channel `json:"channel,omitempty"`
	Runner  string          `json:"runner,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	// Until ends a collect prompt's window.
	Until parley.Time `json:"until"`
	// TurnID is the exchange the prompt's message belongs to (a task run).
	TurnID string `json:"turnId,omitempty"`
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
}

// DispatchPrompt hands the next ready prompt to Runner, if the queue is not
// busy and no other agent holds the floor. Content is the prompt's text,
// read by the engine from its events (NextPrompt says which).
type DispatchPrompt struct {
	Runner  string
	Content string
}

// CompletePrompt marks the prompt dispatched to the actor complete.
type CompletePrompt struct{ Actor }

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

func (EnqueuePrompt) command()  {}
func (DispatchPrompt) command() {}
func (CompletePrompt) command() {}
func (RequeuePrompt) command()  {}
func (WithdrawPrompt) command() {}
func (PromotePrompt) command()  {}

// Active returns the dispatched prompt, if any.
func (s State) Active() *QueuedPrompt {
	for i := range s.Queue {
		if s.Queue[i].Runner != "" {
			return &s.Queue[i]
		}
	}
	return nil
}

// NextPrompt returns the prompt DispatchPrompt would hand to runner at now,
// or nil: none while one is dispatched, and a collect prompt only after its
// window.
func (s State) NextPrompt(runner string, now time.Time) *QueuedPrompt {
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
	if err := d.checkOpen(); err != nil {
		return err
	}
	mode := c.Mode
	if mode == "" {
		mode = ModeFollowup
	}
	switch {
	case !parley.ValidID(c.ID):
		return parley.Errorf(parley.EINVALIDVALUE, "prompt id %q is not 1-128 characters of A-Z a-z 0-9 . _ : -", c.ID)
	case mode != ModeFollowup && mode != ModeSteer && mode != ModeCollect && mode != ModeReject:
		return parley.Errorf(parley.EINVALIDVALUE, "mode %q is not one of followup, steer, collect, reject", mode)
	case c.Content == "":
		return parley.Errorf(parley.EINVALIDVALUE, "a prompt needs content")
	case len(c.Content) > d.env.Limits.MaxTextBytes:
		return parley.Errorf(parley.ETOOLARGE, "the prompt is %d bytes; the limit is %d", len(c.Content), d.env.Limits.MaxTextBytes)
	case c.To != "" && !parley.ValidID(c.To):
		return parley.Errorf(parley.EINVALIDVALUE, "to %q is not a valid agent id", c.To)
	case slices.ContainsFunc(d.s.Queue, func(p QueuedPrompt) bool { return p.ID == c.ID }):
		return d.conflict(parley.EBUSY, "prompt %s is already queued", c.ID)
	case mode == ModeReject && len(d.s.Queue) > 0:
		return d.conflict(parley.EBUSY, "the conversation is busy with %d prompt(s); mode reject refuses to queue", len(d.s.Queue))
	}
	ev := promptEvent{ID: c.ID, Content: c.Content, Mode: mode, To: c.To, Channel: c.Channel}
	if mode == ModeCollect {
		ev.Until = parley.NewTime(d.env.Now.Add(c.Window))
		if n := len(d.s.Queue); n > 0 {
			last := d.s.Queue[n-1]
			if last.Mode == ModeCollect && last.Runner == "" && last.AgentID == c.AgentID && d.env.Now.Before(last.Until.Time) {
				ev.Into = last.ID // merged into the prompt still collecting
			}
		}
	}
	e := d.emit(EventPromptQueued, 0, "", c.AgentID, parley.FinalityNone, ev)
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

func (d *decider) dispatch(c DispatchPrompt) error {
	p := d.s.NextPrompt(c.Runner, d.env.Now)
	if p == nil || (d.s.Open != nil && d.s.Open.Owner != c.Runner) {
		return nil // nothing ready, or another agent holds the floor
	}
	id, written, asker, channel, turnID := p.ID, p.Written, p.AgentID, p.Channel, p.TurnID
	if !written {
		// The prompt becomes a user message: the asker's turn, opened and
		// closed; a task's prompt belongs to the task run's exchange.
		err := d.postMessage(PostMessage{Actor: Actor{AgentID: asker}, ID: id, Role: parley.RoleUser,
			Parts: []parley.Part{{Type: parley.PartText, Text: c.Content}}, Finality: parley.FinalityTurn, Channel: channel,
			TurnID: turnID, Known: Lookups{TurnIDKnown: turnID != ""}})
		if err != nil {
			d.out = Decision{}
			return nil // the floor is not free (a claim, say): try again later
		}
	}
	e := d.emit(EventPromptDispatched, 0, "", c.Runner, parley.FinalityNone, promptEvent{ID: id, Runner: c.Runner})
	d.out.Result = Result{Seq: e.Seq, Message: d.out.Result.Message}
	return nil
}

func (d *decider) complete(c CompletePrompt) error {
	a := d.s.Active()
	if a == nil || a.Runner != c.AgentID || d.s.Closed {
		// Nothing dispatched to this runner (a repeated complete does
		// nothing), or the conversation is closed and takes no more events.
		return nil
	}
	e := d.emit(EventPromptCompleted, 0, "", c.AgentID, parley.FinalityNone, promptEvent{ID: a.ID})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

func (d *decider) requeue(c RequeuePrompt) error {
	a := d.s.Active()
	if a == nil || a.Runner != c.Runner || c.ID != "" && a.ID != c.ID || d.s.Closed {
		return nil // nothing to put back, or closed: nothing is dispatched again
	}
	e := d.emit(EventPromptRequeued, 0, "", c.Runner, parley.FinalityNone, promptEvent{ID: a.ID})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

// waiting checks that a prompt is in the queue and not being answered, in a
// conversation that is still open (a closed one takes no more events).
func (d *decider) waiting(id string) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	i := slices.IndexFunc(d.s.Queue, func(p QueuedPrompt) bool { return p.ID == id })
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
	e := d.emit(EventPromptCanceled, 0, "", c.AgentID, parley.FinalityNone, promptEvent{ID: c.ID, Reason: "withdrawn"})
	d.out.Result = Result{Seq: e.Seq}
	return nil
}

func (d *decider) promote(c PromotePrompt) error {
	if err := d.waiting(c.ID); err != nil {
		return err
	}
	e := d.emit(EventPromptPromoted, 0, "", c.AgentID, parley.FinalityNone, promptEvent{ID: c.ID})
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
	i := slices.IndexFunc(q, func(x QueuedPrompt) bool { return x.ID == p.ID || (p.Into != "" && x.ID == p.Into) })
	switch e.Type {
	case EventPromptQueued:
		if p.Into != "" && i >= 0 {
			q[i].Parts = append(slices.Clone(q[i].Parts), e.Seq)
			q[i].Until = p.Until
			break
		}
		np := QueuedPrompt{ID: p.ID, Mode: p.Mode, AgentID: e.AgentID, To: p.To, Channel: p.Channel, Parts: []int64{e.Seq}, Until: p.Until, TurnID: p.TurnID}
		if p.Mode == ModeSteer {
			q = slices.Insert(q, firstWaiting(q), np)
		} else {
			q = append(q, np)
		}
	case EventPromptDispatched:
		if i >= 0 {
			q[i].Runner, q[i].Written = p.Runner, true
		}
	case EventPromptCompleted, EventPromptCanceled:
		if i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
	case EventPromptRequeued, EventPromptPromoted:
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
func firstWaiting(q []QueuedPrompt) int {
	for i, p := range q {
		if p.Runner == "" {
			return i
		}
	}
	return len(q)
}

// EventTaskRun records one firing of a scheduled task (seed 000); its run id
// is the turnId of the prompt it queues.
const EventTaskRun = "task.run"

// RunTask records a firing of a scheduled task and queues its prompt. Due is
// false when the task no longer runs at Task.NextRunAt (it fired already):
// then nothing is written.
type RunTask struct {
	Task     parley.Task
	RunID    string
	PromptID string
	Next     parley.Time
	Due      bool
}

func (RunTask) command() {}

func (d *decider) runTask(c RunTask) error {
	if !c.Due || d.s.Closed {
		return nil
	}
	d.emit(EventTaskRun, 0, c.RunID, c.Task.AgentID, parley.FinalityNone, map[string]string{"taskId": c.Task.ID, "runId": c.RunID})
	e := d.emit(EventPromptQueued, 0, c.RunID, c.Task.AgentID, parley.FinalityNone, promptEvent{ID: c.PromptID, Content: c.Task.Prompt, Mode: ModeFollowup, TurnID: c.RunID})
	d.out.Task = &parley.TaskAdvance{TaskID: c.Task.ID, From: c.Task.NextRunAt, To: c.Next}
	d.out.Result = Result{Seq: e.Seq}
	return nil
}
