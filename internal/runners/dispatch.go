// Package runners keeps the runners: the runner connections attached to
// this node (and, with several nodes on one store, those of the others, as
// leases in the store), the prompts dispatched to them, what they are told
// (prompts, aborts, reverts, errors), the frames they send, applied through
// the engine, and the grace period of a runner that left while its message
// streamed. The engine is the write path; it tells the Dispatcher of every
// change (engine.Runners), and the Dispatcher acts on it in the background.
package runners

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// Options configure a Dispatcher. Zero values take the defaults.
type Options struct {
	// Grace is how long a streaming message waits for its runner to come
	// back before it is finalized canceled (default 30s).
	Grace time.Duration
	// PresenceLease is how long a node's record of its runners holds
	// without renewal, with several nodes (default 15s): a runner on a node
	// that died counts as gone this long after, and its streaming messages
	// end Grace after that, at the latest.
	PresenceLease time.Duration
	// Now returns the current time; tests may replace it.
	Now func() time.Time
	// Logger receives background failures.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	if o.PresenceLease <= 0 {
		o.PresenceLease = 15 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is what a Dispatcher keeps in the store itself (store.Store is
// one): this node's runner leases and the others', and the conversations
// whose prompts wait for an agent.
type Store interface {
	RenewRunners(ctx context.Context, p store.RenewRunnersParams) error
	LiveRunners(ctx context.Context, p store.LiveRunnersParams) ([]store.RunnerLease, error)
	QueuedFor(ctx context.Context, p store.QueuedForParams) ([]string, error)
}

// Dispatcher holds the runners of one node. It is safe for concurrent use.
type Dispatcher struct {
	eng   *engine.Engine
	store Store
	opts  Options
	node  string // this node's id in the store's runner leases

	mu      sync.Mutex
	runners map[string]map[string][]*handle // conversation runners: by conversation and agent
	wide    map[string][]*handle            // agent-wide runners, by agent
	remote  map[string][]string             // agents with a runner on another node, by conversation
	// remoteWide holds the agents with an agent-wide runner on another node.
	remoteWide map[string]bool
	// heldBy is, by conversation, the connection its active prompt was
	// dispatched to here.
	heldBy map[string]*handle
	// wideConvs counts, by conversation, the agent-wide connections that
	// hold a prompt of it or have written in it: it stays cached here.
	wideConvs map[string]int
	orphans   map[string]*time.Timer // grace periods running, by conversation and agent
	// wrote is, for each grace period running (same keys), when the
	// newest event of its agent there that this node heard of was written.
	wrote   map[string]time.Time
	collect map[string]*time.Timer // dispatches waiting for a collect prompt's window, by conversation
	// presenceKick wakes KeepPresence when a runner comes or goes.
	presenceKick chan struct{}
	closed       bool
	done         chan struct{}
	wg           sync.WaitGroup
}

// handle is one attached runner connection: of one conversation, or
// agent-wide (conversationID "").
type handle struct {
	agentID        string
	conversationID string
	// admin is set when an admin token connected it: it stays when its
	// agent leaves the conversation.
	admin bool
	// end, if set, ends the connection with an error frame (as revoking
	// its token does): when its agent leaves the conversation.
	end func(error)
	// push hands the connection a frame to send; nil asks it to close
	// after the frames pushed before.
	push func(frame []byte)
	// held is, by conversation, the prompt dispatched to this connection
	// while it is active there (guarded by Dispatcher.mu).
	held map[string]string
	// touched holds the conversations an agent-wide connection was given
	// a prompt of or wrote in (guarded by Dispatcher.mu).
	touched map[string]bool
	// dropped is set when its conversation was deleted (guarded by
	// Dispatcher.mu).
	dropped bool
	// given counts the prompts dispatched to it, and trying the dispatches
	// under way that chose it (both guarded by Dispatcher.mu), to choose
	// between agent-wide connections.
	given  uint64
	trying int
}

// load is how busy an agent-wide connection is: the prompts it answers
// and the dispatches that chose it.
func (h *handle) load() int { return len(h.held) + h.trying }

// wide reports whether h is an agent-wide connection.
func (h *handle) wide() bool { return h.conversationID == "" }

// frameConversation is the conversationId of the frames h is sent about
// a conversation: named on an agent-wide connection, implied on another.
func (h *handle) frameConversation(conversationID string) string {
	if h.wide() {
		return conversationID
	}
	return ""
}

// New returns the Dispatcher of eng's runners, which keeps its leases in
// st (eng's store), and makes the engine tell it of every change
// (engine.SetRunners). Call it before the engine is used.
func New(eng *engine.Engine, st Store, opts Options) *Dispatcher {
	opts.setDefaults()
	d := &Dispatcher{eng: eng, store: st, opts: opts, node: engine.NewID(), runners: make(map[string]map[string][]*handle),
		wide: make(map[string][]*handle), remoteWide: map[string]bool{}, heldBy: make(map[string]*handle), wideConvs: make(map[string]int),
		orphans: make(map[string]*time.Timer), wrote: make(map[string]time.Time), collect: make(map[string]*time.Timer), presenceKick: make(chan struct{}, 1), done: make(chan struct{})}
	eng.SetRunners(d)
	return d
}

// Close stops the grace periods and waits for the dispatches under way.
// Close it before its engine.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if !d.closed {
		close(d.done)
	}
	d.closed = true
	for _, t := range d.orphans {
		t.Stop()
	}
	for _, t := range d.collect {
		t.Stop()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// background runs fn in a goroutine that Close waits for, unless the
// Dispatcher is closed.
func (d *Dispatcher) background(fn func()) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		fn()
	}()
}

// Attach records that a runner of agentID is connected to a conversation;
// push sends it frames (prompts, aborts, reverts). When the conversation is
// deleted, push is given an error frame saying so and then nil: the
// connection must send what it was pushed and close. Call the returned
// function when it disconnects: the prompt it was answering goes back to
// the queue, and its streaming messages wait the grace period for it
// (unless the conversation was deleted).
func (d *Dispatcher) Attach(conversationID, agentID string, push func(frame []byte)) (detach func()) {
	return d.AttachActor(conversationID, conv.Actor{AgentID: agentID}, push, nil)
}

// AttachActor is Attach for the runner of act.AgentID that act connected:
// unless act is an admin, the runner is ended when its agent no longer
// takes part in the conversation (a conversation.updated event removed
// it), with end (nil: an error frame pushed, then nil), as when its token
// is revoked.
func (d *Dispatcher) AttachActor(conversationID string, act conv.Actor, push func(frame []byte), end func(error)) (detach func()) {
	agentID := act.AgentID
	h := &handle{agentID: agentID, conversationID: conversationID, admin: act.Admin, push: push, end: end, held: map[string]string{}}
	d.mu.Lock()
	byAgent := d.runners[conversationID]
	if byAgent == nil {
		byAgent = make(map[string][]*handle)
		d.runners[conversationID] = byAgent
	}
	byAgent[agentID] = append(byAgent[agentID], h)
	d.mu.Unlock()
	d.kickPresence()
	d.kick(conversationID)
	d.eng.Reguide(conversationID)
	d.redeliverInputs(conversationID, h)
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			if h.dropped {
				d.mu.Unlock()
				return
			}
			byAgent := d.runners[conversationID]
			byAgent[agentID] = slices.DeleteFunc(byAgent[agentID], func(x *handle) bool { return x == h })
			if len(byAgent[agentID]) == 0 {
				delete(byAgent, agentID)
				if len(byAgent) == 0 {
					delete(d.runners, conversationID)
				}
			}
			d.mu.Unlock()
			d.kickPresence()
			d.left(h, conversationID)
			d.eng.Reguide(conversationID)
		})
	}
}

// left settles what a departed connection leaves in a conversation: with
// no other runner of its agent here, the prompt it was answering goes back
// to the queue and its streaming messages wait the grace period; with
// another, the prompt it held goes back to the queue, and on to that one.
func (d *Dispatcher) left(h *handle, conversationID string) {
	d.mu.Lock()
	held := h.held[conversationID]
	if d.heldBy[conversationID] == h {
		delete(d.heldBy, conversationID)
	}
	delete(h.held, conversationID)
	others := d.attachedLocked(conversationID, h.agentID)
	d.mu.Unlock()
	switch {
	case !others:
		d.requeue(conversationID, h.agentID, "")
		d.orphanTimer(conversationID, h.agentID, true, d.opts.Grace)
	case held != "":
		d.requeue(conversationID, h.agentID, held)
	}
}

// Agents implements engine.Runners: the agents with a runner for the
// conversation of s, here or (with several nodes) on another node, its own
// or agent-wide (of agents that take part in it), sorted.
func (d *Dispatcher) Agents(s conv.State) []string {
	id := s.Conversation.ID
	d.mu.Lock()
	defer d.mu.Unlock()
	agents := slices.Clone(d.remote[id])
	agents = slices.AppendSeq(agents, maps.Keys(d.runners[id]))
	for agent := range d.wide {
		if s.IsMember(agent) {
			agents = append(agents, agent)
		}
	}
	for agent := range d.remoteWide {
		if s.IsMember(agent) {
			agents = append(agents, agent)
		}
	}
	slices.Sort(agents)
	return slices.Compact(agents)
}

// Here implements engine.Runners: a runner of the conversation is attached
// here, or an agent-wide one is at work in it.
func (d *Dispatcher) Here(conversationID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runners[conversationID]) > 0 || d.wideConvs[conversationID] > 0
}

// AgentWide implements engine.Runners.
func (d *Dispatcher) AgentWide() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.wide) > 0
}

// Changed implements engine.Runners: it forgets the prompts that ended,
// tells the runner of each prompt aborted to stop, dispatches a prompt that
// waits while the floor is free, and starts the grace period of streaming
// messages read from the store whose runner is not here.
func (d *Dispatcher) Changed(c engine.Change) {
	id := c.ConversationID
	d.mu.Lock()
	if h := d.heldBy[id]; h != nil {
		if a := c.State.Active(); a == nil || a.ID != h.held[id] {
			delete(h.held, id)
			delete(d.heldBy, id)
		}
	}
	d.mu.Unlock()
	for _, ev := range c.Events {
		if ev.Type == parley.EventPromptAborted {
			if p, ok := abortedPrompt(ev); ok {
				d.pushAbort(id, p.ID, p.Runner)
			}
		}
	}
	d.pushAnswers(id, c.State, c.Events)
	for _, ev := range c.Events {
		if ev.Type == parley.EventConversationUpdated {
			d.removed(id, c.State)
			break
		}
	}
	if len(c.State.Queue) > 0 && c.State.Active() == nil {
		d.kickWhenReady(c.State)
	}
	if c.Loaded {
		d.watchOrphans(id, c.State)
	}
	d.heard(id, c.Events) // (after watchOrphans: the events that made a stream count too)
}

// Deleted implements engine.Runners: the conversation's own runners are
// sent err and closed, and forgotten; agent-wide runners at work in it are
// sent err about it, and go on with their other conversations.
func (d *Dispatcher) Deleted(conversationID string, err *parley.Error) {
	d.mu.Lock()
	var own, wide []*handle
	for _, list := range d.runners[conversationID] {
		for _, h := range list {
			h.dropped = true
		}
		own = append(own, list...)
	}
	delete(d.runners, conversationID)
	for _, list := range d.wide {
		for _, h := range list {
			if h.touched[conversationID] || h.held[conversationID] != "" {
				delete(h.touched, conversationID)
				delete(h.held, conversationID)
				wide = append(wide, h)
			}
		}
	}
	delete(d.heldBy, conversationID)
	delete(d.wideConvs, conversationID)
	d.mu.Unlock()
	for _, h := range own {
		h.push(ErrorFrame("", err))
		h.push(nil)
	}
	for _, h := range wide {
		h.push(ErrorFrame(conversationID, err))
	}
}

// removed ends the runners of the agents that no longer take part in
// the conversation of s: its own runners of such an agent (but those an
// admin connected) are sent an error frame and closed, as when their
// token is revoked, which settles their prompt as any departure does;
// agent-wide runners are told about it, and go on with their other
// conversations.
func (d *Dispatcher) removed(conversationID string, s conv.State) {
	err := parley.Errorf(parley.EFORBIDDEN, "agent no longer takes part in conversation %s: it was removed from it", conversationID)
	d.mu.Lock()
	var own, wide []*handle
	for agent, list := range d.runners[conversationID] {
		if s.IsMember(agent) {
			continue
		}
		for _, h := range list {
			if !h.admin {
				own = append(own, h)
			}
		}
	}
	for agent, list := range d.wide {
		if s.IsMember(agent) {
			continue
		}
		for _, h := range list {
			if h.touched[conversationID] || h.held[conversationID] != "" {
				delete(h.touched, conversationID)
				wide = append(wide, h)
			}
		}
	}
	d.mu.Unlock()
	for _, h := range own {
		if h.end != nil {
			h.end(err)
			continue
		}
		h.push(ErrorFrame("", err))
		h.push(nil)
	}
	for _, h := range wide {
		h.push(ErrorFrame(conversationID, err))
	}
}

// attachedHere reports whether a runner of agentID is attached to the
// conversation on this node: its own, or an agent-wide one.
func (d *Dispatcher) attachedHere(conversationID, agentID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attachedLocked(conversationID, agentID)
}

// attachedLocked is attachedHere with d.mu held.
func (d *Dispatcher) attachedLocked(conversationID, agentID string) bool {
	return len(d.runners[conversationID][agentID]) > 0 || len(d.wide[agentID]) > 0
}

// candidates returns the connections a prompt of the conversation of s may
// go to, one per agent, by agent id: the newest of the agent's runners of
// the conversation, else (if the agent takes part) its least busy
// agent-wide runner (of those as busy, the one given fewest prompts),
// marked as chosen (trying) until release is called.
func (d *Dispatcher) candidates(s conv.State) (hs []*handle, release func()) {
	id := s.Conversation.ID
	d.mu.Lock()
	defer d.mu.Unlock()
	byAgent := d.runners[id]
	hs = make([]*handle, 0, len(byAgent))
	for _, list := range byAgent {
		if len(list) > 0 {
			hs = append(hs, list[len(list)-1])
		}
	}
	var chosen []*handle
	for agent, list := range d.wide {
		if len(byAgent[agent]) > 0 || len(list) == 0 || !s.IsMember(agent) {
			continue
		}
		h := slices.MinFunc(list, func(a, b *handle) int {
			return cmp.Or(cmp.Compare(a.load(), b.load()), cmp.Compare(a.given, b.given))
		})
		h.trying++ // so that the dispatches under way at once spread
		chosen = append(chosen, h)
	}
	hs = append(hs, chosen...)
	slices.SortFunc(hs, func(a, b *handle) int { return strings.Compare(a.agentID, b.agentID) })
	return hs, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, h := range chosen {
			h.trying--
		}
	}
}

// newestOf returns the connection of agentID that is told about the
// conversation: the one its active prompt there went to, else its newest
// runner of the conversation, else one of its agent-wide runners at work
// there; nil if none is here.
func (d *Dispatcher) newestOf(conversationID, agentID string) *handle {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h := d.heldBy[conversationID]; h != nil && h.agentID == agentID {
		return h
	}
	if list := d.runners[conversationID][agentID]; len(list) > 0 {
		return list[len(list)-1]
	}
	for _, h := range d.wide[agentID] {
		if h.touched[conversationID] {
			return h
		}
	}
	return nil
}

// tellAll returns the connections told of a change to the conversation
// (a revert): its own runners, the newest of each agent, and the
// agent-wide runners at work in it.
func (d *Dispatcher) tellAll(conversationID string) []*handle {
	d.mu.Lock()
	defer d.mu.Unlock()
	var hs []*handle
	for _, list := range d.runners[conversationID] {
		if len(list) > 0 {
			hs = append(hs, list[len(list)-1])
		}
	}
	for _, list := range d.wide {
		for _, h := range list {
			if h.touched[conversationID] {
				hs = append(hs, h)
			}
		}
	}
	return hs
}
