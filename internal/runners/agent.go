package runners

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// An agent-wide runner serves every conversation its agent takes part in
// over one connection: an agent that answers thousands of chats does not
// open a connection per chat. Prompts of the agent's conversations are
// spread over its agent-wide connections, the least busy first, one answer
// at a time per conversation (the queue's rule), whichever node the
// connections and the prompts are on; every frame, both ways, names its
// conversation. A conversation's own runner of the agent, if one is
// attached, goes first.

// MaxAgentConversations bounds the conversations one agent-wide connection
// is at work in at once (each holds a little protocol state): past it, the
// idle ones are forgotten, and if none is idle, a frame that names one more
// is refused.
const MaxAgentConversations = 10_000

// AgentSession is one agent-wide connection's side of the protocol: it
// hands each frame to the Session of the conversation the frame names, made
// when a frame first names it. It is used by one goroutine at a time.
type AgentSession struct {
	d        *Dispatcher
	h        *handle
	act      conv.Actor
	check    func(ctx context.Context, conversationID string) error
	sessions map[string]*Session
}

// AttachAgent records that an agent-wide runner of act.AgentID is
// connected; push sends it frames, as Attach's does, each naming its
// conversation. check says whether the runner may work in a conversation
// its frames name (who may write there). Prompts already waiting in the
// agent's conversations are dispatched in the background. Call detach when
// it disconnects: what it was answering goes back to the queues, and its
// streaming messages wait the grace period for a runner of the agent.
func (d *Dispatcher) AttachAgent(act conv.Actor, push func(frame []byte), check func(ctx context.Context, conversationID string) error) (*AgentSession, func()) {
	h := &handle{agentID: act.AgentID, push: push, held: map[string]string{}, touched: map[string]bool{}}
	d.mu.Lock()
	first := len(d.wide[act.AgentID]) == 0
	d.wide[act.AgentID] = append(d.wide[act.AgentID], h)
	d.mu.Unlock()
	d.kickPresence()
	if first {
		// Guidance names the agent in its conversations now: those alone
		// are looked at, however many others the node holds.
		d.eng.ReguideAgents(act.AgentID)
	}
	d.background(func() { d.dispatchWaiting(act.AgentID) })
	var once sync.Once
	detach := func() {
		once.Do(func() {
			d.mu.Lock()
			list := d.wide[h.agentID]
			for i, x := range list {
				if x == h {
					list = append(list[:i:i], list[i+1:]...)
					break
				}
			}
			last := len(list) == 0
			if last {
				delete(d.wide, h.agentID)
			} else {
				d.wide[h.agentID] = list
			}
			var convs []string
			for id := range h.touched {
				convs = append(convs, id)
			}
			for id := range h.held {
				if !h.touched[id] {
					convs = append(convs, id)
				}
			}
			d.mu.Unlock()
			d.kickPresence()
			for _, id := range convs {
				d.left(h, id)
				d.mu.Lock()
				d.untouch(h, id)
				d.mu.Unlock()
			}
			if last {
				d.eng.ReguideAgents(h.agentID)
			}
		})
	}
	return &AgentSession{d: d, h: h, act: act, check: check, sessions: map[string]*Session{}}, detach
}

// dispatchWaiting dispatches the prompts waiting in the conversations of
// agentID, page by page: what an agent-wide runner that has just connected
// may answer.
func (d *Dispatcher) dispatchWaiting(agentID string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for after := ""; ctx.Err() == nil; {
		ids, err := d.store.QueuedFor(ctx, store.QueuedForParams{AgentID: agentID, After: after, Limit: 500})
		if err != nil {
			if ctx.Err() == nil {
				d.opts.Logger.Warn("reading an agent's waiting prompts failed", slog.String("agent", agentID), slog.Any("err", err))
			}
			return
		}
		for _, id := range ids {
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			err := d.dispatch(dctx, id)
			dcancel()
			if err != nil && ctx.Err() == nil && parley.ErrorCode(err) != parley.ENOTFOUND {
				d.opts.Logger.Warn("dispatch failed", slog.String("conversation", id), slog.Any("err", err))
			}
		}
		if len(ids) < 500 {
			return
		}
		after = ids[len(ids)-1]
	}
}

// Apply applies one frame in the conversation it names (see
// Session.Apply). A frame must name one (conversationId); the first frame
// in a conversation is refused unless the runner may work there.
func (a *AgentSession) Apply(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	s, err := a.session(ctx, f)
	if err != nil {
		return nil, err
	}
	return s.Apply(ctx, f)
}

// Submit is Session.Submit in the conversation the frame names.
func (a *AgentSession) Submit(ctx context.Context, f *Frame) *engine.Ack {
	s, err := a.session(ctx, f)
	if err != nil {
		return engine.Acked(nil, err)
	}
	return s.Submit(ctx, f)
}

// session returns the Session of the conversation a frame names, made
// when a frame first names it.
func (a *AgentSession) session(ctx context.Context, f *Frame) (*Session, error) {
	id := f.ConversationID
	if id == "" {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "a frame on an agent-wide runner connection names its conversation (conversationId)")
	}
	if !parley.ValidID(id) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "conversationId %.200q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", id)
	}
	s := a.sessions[id]
	if s == nil {
		if len(a.sessions) >= MaxAgentConversations && !a.forgetIdle() {
			return nil, parley.Errorf(parley.EBUSY, "this connection is at work in %d conversations, the most it may be; finish some, or open another connection", len(a.sessions))
		}
		if err := a.check(ctx, id); err != nil {
			return nil, err
		}
		s = a.d.Session(id, a.act)
		a.sessions[id] = s
		a.d.mu.Lock()
		a.d.touch(a.h, id)
		a.d.mu.Unlock()
	}
	return s, nil
}

// forgetIdle forgets the sessions of conversations in which this
// connection has no message under way and no prompt to answer, and
// reports whether it forgot any.
func (a *AgentSession) forgetIdle() bool {
	a.d.mu.Lock()
	defer a.d.mu.Unlock()
	n := len(a.sessions)
	for id, s := range a.sessions {
		if s.active == "" && a.h.held[id] == "" {
			delete(a.sessions, id)
			a.d.untouch(a.h, id)
		}
	}
	return len(a.sessions) < n
}
