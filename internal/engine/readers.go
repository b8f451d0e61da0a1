package engine

import (
	"context"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// A stream of a conversation is let in once, when it opens, by who may
// read the conversation then. For admins and viewers that right lasts as
// long as the conversation; for its members, until a conversation.updated
// event removes them (their streams are recorded by conversation, and
// that write ends them before it is handed to the streams). A delegate of the open turn reads only while that turn is
// open: its streams are recorded by conversation, and every write that
// takes the right away (the turn closes, is reset or aborted, the
// conversation is closed) ends them, as revoking a token ends its
// connections, before the write's events are handed to the streams.

// ConnectReader records a live stream of conversation id, as Connect does,
// once who may read it (conv.State.CanRead): it returns ENOTFOUND for an
// unknown conversation and EFORBIDDEN for an agent that may not read it,
// before ERATELIMITED. If who reads it as a delegate of its open turn, end
// is also called, once, with EFORBIDDEN when that turn ends, before any
// event that ended it is published: the stream is sent nothing its agent
// may no longer read. end must not block. Call release when the stream
// ends.
func (e *Engine) ConnectReader(ctx context.Context, who parley.Identity, max int, id string, end func(error)) (release func(), err error) {
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return nil, err
	}
	// Checked and recorded under the conversation's lock, so that no write
	// comes between them.
	defer c.mu.Unlock()
	if err := c.state.CanRead(who); err != nil {
		return nil, err
	}
	conn, forget, err := e.conns.add(who, max, end)
	if err != nil || who.Kind != parley.TokenAgent {
		return forget, err // a right that lasts as long as the conversation
	}
	if c.state.IsMember(who.AgentID) {
		e.conns.join(id, conn, who)
		return func() {
			e.conns.leave(id, conn)
			forget()
		}, nil
	}
	e.conns.watch(id, conn, who)
	return func() {
		e.conns.unwatch(id, conn)
		forget()
	}, nil
}

// readerSets holds streams by conversation id, each with who reads it.
type readerSets map[string]map[*liveConn]parley.Identity

// add records that conn reads conversation id as who; the caller holds conns.mu.
func (r *readerSets) add(id string, conn *liveConn, who parley.Identity) {
	if *r == nil {
		*r = make(readerSets)
	}
	if (*r)[id] == nil {
		(*r)[id] = make(map[*liveConn]parley.Identity)
	}
	(*r)[id][conn] = who
}

// remove forgets that conn reads conversation id, and reports whether it
// did; the caller holds conns.mu.
func (r readerSets) remove(id string, conn *liveConn) bool {
	if _, ok := r[id][conn]; !ok {
		return false
	}
	delete(r[id], conn)
	if len(r[id]) == 0 {
		delete(r, id)
	}
	return true
}

// watch records that conn reads conversation id as who, a delegate.
func (m *conns) watch(id string, conn *liveConn, who parley.Identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delegated.add(id, conn, who)
	m.watching.Add(1)
}

func (m *conns) unwatch(id string, conn *liveConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.delegated.remove(id, conn) {
		m.watching.Add(-1)
	}
}

// join records that conn reads conversation id as who, a member of it.
func (m *conns) join(id string, conn *liveConn, who parley.Identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members.add(id, conn, who)
}

func (m *conns) leave(id string, conn *liveConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members.remove(id, conn)
}

// endMembers ends the streams of conversation id read by members that
// the state s no longer counts as members (nor delegates): a
// conversation.updated event removed them. The conversation's lock must
// be held.
func (e *Engine) endMembers(id string, s conv.State) {
	m := &e.conns
	m.mu.Lock()
	var ended []*liveConn
	for conn, who := range m.members[id] {
		if s.CanRead(who) != nil {
			ended = append(ended, conn)
		}
	}
	for _, conn := range ended {
		m.members.remove(id, conn)
	}
	m.mu.Unlock()
	for _, conn := range ended {
		conn.stop(parley.Errorf(parley.EFORBIDDEN, "conversation %s was changed: this agent no longer takes part in it, and may no longer read it", id))
	}
}

// watched reports whether a delegate reads conversation id.
func (m *conns) watched(id string) bool {
	if m.watching.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.delegated[id]) > 0
}

// delegateReader is a stream read by a delegate.
type delegateReader struct {
	conn *liveConn
	who  parley.Identity
}

// readers returns the delegates' streams of conversation id.
func (m *conns) readers(id string) []delegateReader {
	if m.watching.Load() == 0 {
		return nil // the common case: no delegate streams anywhere
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.delegated[id]
	if len(set) == 0 {
		return nil
	}
	out := make([]delegateReader, 0, len(set))
	for c, who := range set {
		out = append(out, delegateReader{conn: c, who: who})
	}
	return out
}

// endReaders ends the delegates' streams of conversation id that may not
// read the state some of events leaves, before they are published. next
// is the state after the events; prev, if known, the state before them,
// from which each event's state is folded (the right may end and come
// back among the events of several writes). The conversation's lock must
// be held.
func (e *Engine) endReaders(id string, prev *conv.State, events []parley.Event, next conv.State) {
	for _, ev := range events {
		if ev.Type == parley.EventConversationUpdated {
			e.endMembers(id, next)
			break
		}
	}
	rs := e.conns.readers(id)
	if len(rs) == 0 || len(events) == 0 {
		return
	}
	check := func(s conv.State) {
		for i, r := range rs {
			if r.conn != nil && s.CanRead(r.who) != nil {
				r.conn.stop(parley.Errorf(parley.EFORBIDDEN, "agent %s read conversation %s as a delegate of its open turn; that turn has ended, and with it the right to read", r.who.AgentID, id))
				rs[i].conn = nil
			}
		}
	}
	if prev != nil && len(events) > 1 {
		s := *prev
		for _, ev := range events[:len(events)-1] {
			s = conv.Evolve(s, ev)
			check(s)
		}
	}
	check(next)
}
