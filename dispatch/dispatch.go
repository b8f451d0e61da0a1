// Package dispatch keeps the runners: the runner connections attached to
// this node (and, with several nodes on one store, those of the others, as
// leases in the store), the prompts dispatched to them, what they are told
// (prompts, aborts, reverts, errors), the frames they send, applied through
// the engine, and the grace period of a runner that left while its message
// streamed. The engine is the write path; it tells the Dispatcher of every
// change (engine.Runners), and the Dispatcher acts on it in the background.
package dispatch

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
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

// Dispatcher holds the runners of one node. It is safe for concurrent use.
type Dispatcher struct {
	eng  *engine.Engine
	opts Options
	node string // this node's id in the store's runner leases

	mu      sync.Mutex
	runners map[string]map[string][]*handle // attached connections by conversation and agent
	remote  map[string][]string             // agents with a runner on another node, by conversation
	orphans map[string]*time.Timer          // grace periods running, by conversation and agent
	collect map[string]*time.Timer          // dispatches waiting for a collect prompt's window, by conversation
	// presenceKick wakes KeepPresence when a runner comes or goes.
	presenceKick chan struct{}
	closed       bool
	done         chan struct{}
	wg           sync.WaitGroup
}

// handle is one attached runner connection.
type handle struct {
	agentID string
	// push hands the connection a frame to send; nil asks it to close
	// after the frames pushed before.
	push func(frame []byte)
	// prompt is the id of the last prompt dispatched to this connection
	// (guarded by Dispatcher.mu).
	prompt string
	// dropped is set when its conversation was deleted (guarded by
	// Dispatcher.mu).
	dropped bool
}

// New returns the Dispatcher of eng's runners and makes the engine tell it
// of every change (engine.SetRunners). Call it before the engine is used.
func New(eng *engine.Engine, opts Options) *Dispatcher {
	opts.setDefaults()
	d := &Dispatcher{eng: eng, opts: opts, node: engine.NewID(), runners: make(map[string]map[string][]*handle),
		orphans: make(map[string]*time.Timer), collect: make(map[string]*time.Timer), presenceKick: make(chan struct{}, 1), done: make(chan struct{})}
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
	h := &handle{agentID: agentID, push: push}
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
	done := false
	return func() {
		d.mu.Lock()
		if done || h.dropped {
			done = true
			d.mu.Unlock()
			return
		}
		done = true
		byAgent := d.runners[conversationID]
		byAgent[agentID] = slices.DeleteFunc(byAgent[agentID], func(x *handle) bool { return x == h })
		left, held := len(byAgent[agentID]), h.prompt
		if left == 0 {
			delete(byAgent, agentID)
			if len(byAgent) == 0 {
				delete(d.runners, conversationID)
			}
		}
		d.mu.Unlock()
		d.kickPresence()
		switch {
		case left == 0:
			d.requeue(conversationID, agentID, "")
			d.orphanTimer(conversationID, agentID, true)
			d.eng.Reguide(conversationID)
		case held != "":
			// Another connection of the agent is here (it reconnected
			// before this one was found dead): the prompt this one was
			// given goes back to the queue and on to the newest one.
			d.requeue(conversationID, agentID, held)
		}
	}
}

// Agents implements engine.Runners: the agents with a runner for a
// conversation, here or (with several nodes) on another node, sorted.
func (d *Dispatcher) Agents(conversationID string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	byAgent, remote := d.runners[conversationID], d.remote[conversationID]
	if len(byAgent) == 0 {
		return slices.Clone(remote)
	}
	agents := slices.AppendSeq(slices.Clone(remote), maps.Keys(byAgent))
	slices.Sort(agents)
	return slices.Compact(agents)
}

// Here implements engine.Runners.
func (d *Dispatcher) Here(conversationID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runners[conversationID]) > 0
}

// Changed implements engine.Runners: it tells the runner of each prompt
// aborted to stop, dispatches a prompt that waits while the floor is free,
// and starts the grace period of streaming messages read from the store
// whose runner is not here.
func (d *Dispatcher) Changed(c engine.Change) {
	for _, ev := range c.Events {
		if ev.Type == conv.EventPromptAborted {
			if p, ok := abortedPrompt(ev); ok {
				d.pushAbort(c.ConversationID, p.ID, p.Runner)
			}
		}
	}
	if len(c.State.Queue) > 0 && c.State.Active() == nil {
		d.kickWhenReady(c.ConversationID, c.State)
	}
	if c.Loaded {
		d.watchOrphans(c.ConversationID, c.State)
	}
}

// Deleted implements engine.Runners: the conversation's runners are sent
// err and closed, and forgotten.
func (d *Dispatcher) Deleted(conversationID string, err *parley.Error) {
	d.mu.Lock()
	var hs []*handle
	for _, list := range d.runners[conversationID] {
		for _, h := range list {
			h.dropped = true
		}
		hs = append(hs, list...)
	}
	delete(d.runners, conversationID)
	d.mu.Unlock()
	frame := ErrorFrame(err)
	for _, h := range hs {
		h.push(frame)
		h.push(nil)
	}
}

// attachedHere reports whether a runner of agentID is attached to the
// conversation on this node.
func (d *Dispatcher) attachedHere(conversationID, agentID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runners[conversationID][agentID]) > 0
}

// newest returns the newest connection of each agent attached to a
// conversation, by agent id.
func (d *Dispatcher) newest(conversationID string) []*handle {
	d.mu.Lock()
	defer d.mu.Unlock()
	byAgent := d.runners[conversationID]
	hs := make([]*handle, 0, len(byAgent))
	for _, list := range byAgent {
		if len(list) > 0 {
			hs = append(hs, list[len(list)-1])
		}
	}
	slices.SortFunc(hs, func(a, b *handle) int { return strings.Compare(a.agentID, b.agentID) })
	return hs
}
