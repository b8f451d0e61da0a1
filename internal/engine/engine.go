// Package engine is Parley's one write path. It keeps each loaded
// conversation's state, lets one writer at a time decide a command with the
// pure rules of package conv, appends the events atomically through the store
// with optimistic concurrency on the last seq, evolves the cached state, and
// publishes the events and the new guidance to the feed's subscribers.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// Options configure an Engine. Zero values take the defaults.
type Options struct {
	Limits conv.Limits
	// Now returns the current time; tests may replace it.
	Now func() time.Time
	// Logger receives background failures (claim expiry writes).
	Logger *slog.Logger
	// SubscriberBuffer bounds the live events queued for one subscriber while
	// it catches up or reads slowly; past it the subscriber is disconnected
	// (default 4096).
	SubscriberBuffer int
	// SubscriberBufferBytes bounds the same queue in bytes (default 16 MiB):
	// past it, a subscriber that still holds events is disconnected too. A
	// subscriber that holds none takes any one write, however large.
	SubscriberBufferBytes int
	// SubscriberMemory bounds what the server holds, across all its
	// subscribers, that they have not taken: snapshots being sent, queued
	// events (each once, however many subscribers share it), pages of the
	// log read for them (default 256 MiB). Past it, the subscribers that
	// have taken nothing for longest are disconnected (busy: they may
	// resume) until it holds no more; a new subscriber is refused only if
	// no other can make room (see feed.Options.MemoryBytes).
	SubscriberMemory int64
	// SnapshotMessages is how many of the latest messages a fresh subscriber's
	// snapshot carries (default 100).
	SnapshotMessages int
	// SnapshotBytes bounds the messages a snapshot carries, in JSON: once
	// they reach it, older finished messages are left out and older
	// streaming ones summarized (default 4 MiB). Messages still streaming
	// are always in it.
	SnapshotBytes int
	// SnapshotMessageBytes is the most one message may weigh in a snapshot
	// (JSON); a larger one is summarized, and its readers fetch it whole
	// when they need it (default 128 KiB).
	SnapshotMessageBytes int
	// MaxCached bounds the conversations whose state is kept in memory.
	MaxCached int
	// Metrics, if set, is updated by the engine.
	Metrics *Metrics
	// CollectWindow is how long a collect prompt waits for more (default 2s).
	CollectWindow time.Duration
	// TurnLease is how long an open turn lasts whose owner has no runner
	// attached and writes nothing into it, unless its conversation sets
	// its own (default conv.DefaultTurnLease; see conv.ExpireTurn).
	TurnLease time.Duration
	// MaxRevert bounds the messages one revert removes, all of which its
	// messages.removed event names (default 10,000).
	MaxRevert int
	// Connections counts the streams ConnectReader lets in, by token, and
	// ends them when their token is revoked (tokens.Keeper does; default:
	// none is counted or ended).
	Connections Connections
	// Shared says that other nodes write into the same store (several
	// nodes on one PostgreSQL database): a cached conversation is then
	// brought up to the log's head before it answers anything.
	Shared bool
	// ImportLease is how long an import in progress is kept after its last
	// sign of life (default 1m): an import renews it with every batch and
	// every third of it, so an import is removed (by SweepImports) this long
	// after its server died.
	ImportLease time.Duration
}

func (o *Options) setDefaults() {
	if o.Limits == (conv.Limits{}) {
		o.Limits = conv.DefaultLimits
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SubscriberBuffer <= 0 {
		o.SubscriberBuffer = 4096
	}
	if o.SubscriberBufferBytes <= 0 {
		o.SubscriberBufferBytes = 16 << 20
	}
	if o.SubscriberMemory <= 0 {
		o.SubscriberMemory = 256 << 20
	}
	if o.SnapshotMessages <= 0 {
		o.SnapshotMessages = 100
	}
	if o.SnapshotBytes <= 0 {
		o.SnapshotBytes = 4 << 20
	}
	if o.SnapshotMessageBytes <= 0 {
		o.SnapshotMessageBytes = 128 << 10
	}
	if o.MaxCached <= 0 {
		o.MaxCached = 100_000
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.TurnLease <= 0 {
		o.TurnLease = conv.DefaultTurnLease
	}
	if o.CollectWindow <= 0 {
		o.CollectWindow = 2 * time.Second
	}
	if o.MaxRevert <= 0 {
		o.MaxRevert = 10_000
	}
	if o.ImportLease <= 0 {
		o.ImportLease = time.Minute
	}
	if o.Connections == nil {
		o.Connections = uncounted{}
	}
}

// Engine decides and applies commands. It is safe for concurrent use.
type Engine struct {
	store   store.Store
	opts    Options
	hub     *feed.Hub
	runners Runners // see SetRunners
	// commands gives each conversation's commands their turn (queue.go).
	commands commandQueue

	cache *cache // the conversations loaded here
	conns conns  // live streams: see ConnectReader

	// mu guards closed, and orders wg.Add before Close's Wait.
	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	// owner tells this engine's imports from those of other processes.
	owner string
}

// conversation is one cached conversation; mu makes it one writer at a time.
type conversation struct {
	mu     sync.Mutex
	state  conv.State
	loaded bool
	// dropped is set once the conversation is found gone from the store
	// (deleted, or made again under its id): the entry has left the
	// cache, and whoever holds it looks the id up again (see drop).
	dropped bool
	timer   *time.Timer
	// turnTimer fires when the open turn's lease ends (see lease.go);
	// leaseTurn is the turn it is for, ownerSeen the last time its owner
	// was seen with a runner attached, and ownerHad whether it had one
	// when last looked at.
	turnTimer *time.Timer
	armedTurn int // the turn turnTimer was armed for
	// inputTimer fires when the first pending input request with an
	// expiry expires, at inputAt (see inputs.go).
	inputTimer *time.Timer
	inputAt    time.Time
	leaseTurn  int
	ownerSeen  time.Time
	ownerHad   bool
	// streams holds the streaming messages assembled so far, by id.
	streams map[string]*parley.Message
	// guided is the guidance last published: a new one is published only
	// when who, kind or turn changes.
	guided *parley.Guidance
	// published is the seq of the last event handed to the feed: whatever
	// moves state past it (a reload, a catch-up) hands the feed the rest.
	published int64
	// snapshot is the seq the stored state snapshot is as of (see
	// snapshotDue).
	snapshot int64
	// wanted is the newest seq other nodes said they wrote and catching
	// whether a catch-up runs (see CatchUp); both guarded by cache.mu.
	wanted   int64
	catching bool
	// indexed holds the agents cache.members lists it under, once its
	// state is loaded (guarded by cache.mu).
	indexed []string

	// qmu guards queue, the commands waiting to be decided, and driving,
	// whether a driver works the queue (see queue.go).
	qmu     sync.Mutex
	queue   []*pending
	driving bool // a command has the turn
}

// busy reports whether commands wait in c's queue or a driver works it.
func (c *conversation) busy() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.driving || len(c.queue) > 0
}

// New returns an Engine over s.
func New(s store.Store, opts Options) *Engine {
	opts.setDefaults()
	e := &Engine{store: s, opts: opts, hub: feed.New(s, feed.Options{Buffer: opts.SubscriberBuffer, BufferBytes: opts.SubscriberBufferBytes,
		MemoryBytes: opts.SubscriberMemory, Subscribers: opts.Metrics.Subscribers, SlowDisconnects: opts.Metrics.SlowDisconnects,
		Shed: opts.Metrics.Shed, Delivered: opts.Metrics.Delivered}),
		runners: noRunners{}, conns: conns{counted: opts.Connections}, done: make(chan struct{}), owner: NewID()}
	e.cache = newCache(opts.MaxCached, func(id string) bool { return e.runners.Here(id) || e.hub.Follows(id) })
	opts.Metrics.subscriberBytes.Store(e.hub)
	e.commands = commandQueue{e: e, store: s, metrics: opts.Metrics, shared: opts.Shared}
	e.commands.workers.start(workerCount())
	return e
}

// Limits returns the limits the engine applies.
func (e *Engine) Limits() conv.Limits { return e.opts.Limits }

// Close stops claim timers, the renewal of imports' leases and the import
// sweeper, and ends every subscription; later commands and subscriptions
// get EUNAVAILABLE. It does not close the store.
func (e *Engine) Close() {
	e.mu.Lock()
	if !e.closed {
		close(e.done)
	}
	e.closed = true
	e.mu.Unlock()
	for _, c := range e.cache.entries(nil) {
		c.mu.Lock() // lock order is c.mu before the cache's, so not under it
		c.stopTimers()
		c.mu.Unlock()
	}
	e.hub.EndAll(errClosed)
	e.wg.Wait() // the appends under way too: their outcomes come to the workers
	e.commands.workers.stop()
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// track counts a background goroutine that Close waits for, unless the
// engine is closed already (then it must not start).
func (e *Engine) track() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

func (e *Engine) env() conv.Env { return conv.Env{Now: e.opts.Now(), Limits: e.opts.Limits} }

// NewID returns a new server-made id: a UUIDv7, time-ordered.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// decide runs one command on a conversation: decide, append, evolve,
// publish, in its turn among the conversation's commands (see queue.go).
// build is called with the lock held and may read the store to fill the
// command's look-ups. respond makes the JSON response stored for
// idempotent retries (nil when the command takes no client request id).
func (e *Engine) decide(ctx context.Context, id string, build func(conv.State) (conv.Command, error), respond func(conv.Decision) (*store.Idempotency, error)) (conv.Decision, conv.State, error) {
	p := &pending{ctx: ctx, build: build, respond: respond, turn: make(chan struct{})}
	q := e.commands.enqueue(id, p)
	if q == nil {
		p.wait() // the engine is closed
		return conv.Decision{}, conv.State{}, p.err
	}
	<-p.turn
	o := e.commands.decideOne(id, p)
	e.commands.next(id, q)
	return o.d, o.s, o.err
}

// decideLocked is decide for the conversation c, locked by the caller.
func (e *Engine) decideLocked(ctx context.Context, c *conversation, id string, build func(conv.State) (conv.Command, error), respond func(conv.Decision) (*store.Idempotency, error)) (conv.Decision, conv.State, error) {
	fresh := false // whether c.state was checked against the log's head since the last decision
	for attempt := 0; ; attempt++ {
		cmd, err := build(c.state)
		if err == nil {
			err = conv.Authorize(c.state, cmd) // who may: on the same state as the rules
		}
		var d conv.Decision
		if err == nil {
			d, err = conv.Decide(c.state, cmd, e.env())
		}
		if errors.Is(err, errStale) && attempt < 5 {
			// A row read was newer than the cached state: another node
			// wrote. Catch up and build again; the second time, holding
			// the conversation's lock in the store, under which nothing
			// can be newer.
			if attempt > 0 {
				return e.decideHeld(ctx, c, id, build, respond)
			}
			if _, err := e.catchUp(ctx, c, id); err != nil {
				return conv.Decision{}, c.state, err
			}
			fresh = true
			continue
		}
		if err != nil || d.Replay != nil || (len(d.Events) == 0 && d.Task == nil) {
			// A refusal is made on state as fresh as an acceptance: another
			// node may have written since this one cached the conversation.
			if err != nil && !fresh && attempt < 5 {
				fresh = true
				moved, cerr := e.catchUp(ctx, c, id)
				if cerr == nil && moved {
					continue
				}
				if c.dropped {
					return d, c.state, cerr // the conversation it was for is gone
				}
			}
			return d, c.state, err // (a task's skipped firing writes no event, only the task)
		}
		next := conv.Evolve(c.state, d.Events...)
		err = e.append(ctx, c, nil, c.state, next, d, respond)
		// Another writer (another node, or a racing duplicate id or
		// idempotency key) got there first: catch up (publishing what the
		// other wrote) or reload, and decide again, which turns a
		// duplicate into its proper answer (a replay or a 409).
		if code := parley.ErrorCode(err); (code == parley.ECONFLICT || code == parley.EBUSY) && attempt < 5 {
			if code == parley.ECONFLICT && attempt > 0 && e.opts.Shared {
				// A writer on another node got there first twice: decide
				// once more holding the conversation's lock in the store,
				// which no writer anywhere can overtake.
				return e.decideHeld(ctx, c, id, build, respond)
			}
			if attempt > 0 {
				// Writers on other nodes keep getting there first: step
				// aside for a moment, a random one, so that one wins.
				time.Sleep(time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond))))
			}
			moved, cerr := e.catchUp(ctx, c, id)
			if cerr != nil {
				return conv.Decision{}, c.state, cerr
			}
			if !moved {
				if err := e.reload(ctx, c, id); err != nil {
					return conv.Decision{}, c.state, err
				}
			}
			fresh = true
			continue
		}
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return conv.Decision{}, c.state, e.drop(c, id) // deleted on another node
		}
		if parley.ErrorCode(err) == parley.ECONFLICT {
			// Five writers in a row got there first: the caller may retry.
			return conv.Decision{}, c.state, parley.Errorf(parley.EBUSY, "conversation %s is changing too fast; retry", id)
		}
		if err != nil {
			if parley.ErrorCode(err) == parley.EINTERNAL {
				e.resync(c, id)
			}
			return conv.Decision{}, c.state, err
		}
		e.applied(c, id, next, d)
		return d, next, nil
	}
}

// applied makes a written decision the conversation's state and tells
// everyone who follows it; c.mu must be held.
func (e *Engine) applied(c *conversation, id string, next conv.State, d conv.Decision) {
	prev := c.state
	c.state = next
	c.remember(d.Result.Message)
	for _, ev := range d.Events {
		// An input request ended in a message the decision did not write
		// (a stop, a revert, an expiry): its assembly here follows.
		if ev.Type == parley.EventInputAnswered {
			for _, m := range c.streams {
				if ApplyStreamEvent(m, ev) {
					break
				}
			}
		}
	}
	for _, removed := range d.Removed {
		delete(c.streams, removed)
	}
	e.endReaders(id, &prev, d.Events, next)
	e.reindex(id, c, d.Events)
	e.publish(c, id, d.Events)
	e.runners.Changed(Change{ConversationID: id, State: next, Events: d.Events})
	e.schedule(c, id)
}

// publish hands a conversation's subscribers its new events and, if it
// changed, the guidance of its state; c.mu must be held and c.state current.
func (e *Engine) publish(c *conversation, id string, events []parley.Event) {
	g := e.guidance(id, c.state)
	if sameGuidance(g, c.guided) {
		g = nil
	} else {
		c.guided = g
	}
	if len(events) > 0 {
		c.published = max(c.published, events[len(events)-1].Seq)
	}
	if len(events) > 0 || g != nil {
		e.hub.Publish(id, events, g)
	}
}

// guidance derives who should act next in a conversation, knowing which
// agents have a runner attached to it.
func (e *Engine) guidance(id string, s conv.State) *parley.Guidance {
	runners := e.runners.Agents(s)
	g := s.GuidanceFor(e.opts.Now(), runners)
	if g != nil && len(runners) > 0 {
		g.Runners = runners
	}
	return g
}

// sameGuidance reports whether two guidances name the same agent, kind,
// turn and runners.
func sameGuidance(a, b *parley.Guidance) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.NextAgentID == b.NextAgentID && a.Kind == b.Kind && a.Turn == b.Turn && slices.Equal(a.Runners, b.Runners)
}

// append writes a decision: with the store's Append, or with write if
// set (an append under a lock the caller holds).
func (e *Engine) append(ctx context.Context, c *conversation, write func(store.AppendParams) error, prev, next conv.State, d conv.Decision, respond func(conv.Decision) (*store.Idempotency, error)) error {
	p, snapshot, err := c.appendParams(prev, next, d, respond)
	if err != nil {
		return err
	}
	start := time.Now()
	if write == nil {
		err = e.store.Append(ctx, p)
	} else {
		err = write(p)
	}
	e.opts.Metrics.observeAppend(len(d.Events), time.Since(start), err)
	if err == nil && snapshot {
		c.snapshot = next.LastSeq
	}
	return err
}

// appendParams makes the append of decision d, which takes c from prev
// to next; snapshot says whether it rewrites the stored state snapshot.
func (c *conversation) appendParams(prev, next conv.State, d conv.Decision, respond func(conv.Decision) (*store.Idempotency, error)) (p store.AppendParams, snapshot bool, err error) {
	var state, queue []byte
	snapshot = snapshotDue(c.snapshot, next, d.Events)
	if snapshot {
		state, queue, err = conv.EncodeStored(next, d.Events...)
		if err != nil {
			return p, false, err
		}
	}
	p = store.AppendParams{
		ConversationID: prev.Conversation.ID,
		ExpectSeq:      prev.LastSeq,
		Epoch:          prev.Conversation.Epoch, // never written into another conversation of the id

		Events:         d.Events,
		Names:          conv.Names(prev, d.Events),
		Messages:       d.Messages,
		RemoveMessages: d.Removed,
		Deliveries:     d.Deliveries,
		Task:           d.Task,
		State:          state,
		Queue:          queue, // nil unless the events change the queue
		Conversation:   conversationChange(next, d.Events),
	}
	if respond != nil {
		if p.Idempotency, err = respond(d); err != nil {
			return p, false, err
		}
	}
	return p, snapshot, nil
}

// snapshotEvery is how many events of streamed text and tool updates
// may follow a conversation's stored state snapshot before an append
// rewrites it: streaming appends do not rewrite it each time (a reload
// folds the events after it), every other append does.
const snapshotEvery = 256

// snapshotDue reports whether an append of events, which make next, must
// rewrite the stored state snapshot, which is as of seq snapshot.
func snapshotDue(snapshot int64, next conv.State, events []parley.Event) bool {
	if next.LastSeq-snapshot >= snapshotEvery {
		return true
	}
	for _, ev := range events {
		if ev.Type != parley.EventChunk && ev.Type != parley.EventPartUpdated {
			return true // (an input request's events change the state: they count)
		}
	}
	return false
}

// scheduleClaimExpiry arms a timer that writes claim.expired when the
// conversation's claim lapses; c.mu must be held.
func (e *Engine) scheduleClaimExpiry(c *conversation, id string) {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	claim := c.state.Claim
	if claim == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	wait := claim.ExpiresAt.Sub(e.opts.Now()) + time.Millisecond
	c.timer = time.AfterFunc(wait, func() {
		// Add under e.mu and only while open, so that it happens before
		// Close's Wait: Close sets closed under e.mu first.
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return
		}
		e.wg.Add(1)
		e.mu.Unlock()
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := e.decide(ctx, id, func(conv.State) (conv.Command, error) { return conv.ExpireClaim{}, nil }, nil)
		if err != nil && !errors.Is(err, context.Canceled) && parley.ErrorCode(err) != parley.ENOTFOUND { // deleted meanwhile
			e.opts.Logger.Warn("claim expiry failed", slog.String("conversation", id), slog.Any("err", err))
		}
	})
}

// stateOf reads a stored state (its snapshot and its queue) and puts its
// conversation back.
func stateOf(rec *store.ConversationRecord) (conv.State, error) {
	s, err := conv.DecodeStored(rec.State, rec.Queue)
	if err != nil {
		return s, err
	}
	s.Conversation = rec.Conversation
	return s, nil
}
