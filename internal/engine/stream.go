package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// Streaming messages: start one with PostMessage{Streaming: true},
// then StreamText, StreamTool and FinalizeMessage. The engine keeps each
// in-progress message assembled in memory; after a restart (or on another
// node) it rebuilds it from its row and the chunk and part.updated events
// after the row.

// StreamText appends a text delta to a streaming message. It returns the
// errors of conv.Decide and ENOTFOUND for an unknown conversation.
func (e *Engine) StreamText(ctx context.Context, conversationID string, c conv.StreamText) (*MessageResult, error) {
	return e.commands.enqueueStream(ctx, conversationID, textStream(c), true).Wait()
}

// StreamTextAsync is StreamText that returns once the delta is queued,
// with its Ack: the outcome once it is durable (or refused), without the
// message (a runner's frames in flight would each keep a message's text
// alive, and its answer does not tell it). Deltas queued while their
// conversation's last append is being written are written together, as
// one event (see queue.go).
func (e *Engine) StreamTextAsync(ctx context.Context, conversationID string, c conv.StreamText) *Ack {
	return e.commands.enqueueStream(ctx, conversationID, textStream(c), false)
}

// StreamTool adds or updates a tool call of a streaming message.
func (e *Engine) StreamTool(ctx context.Context, conversationID string, c conv.StreamTool) (*MessageResult, error) {
	return e.commands.enqueueStream(ctx, conversationID, toolStream(c), true).Wait()
}

// StreamToolAsync is StreamTool that returns once the update is queued,
// as StreamTextAsync does (its outcome without the message).
func (e *Engine) StreamToolAsync(ctx context.Context, conversationID string, c conv.StreamTool) *Ack {
	return e.commands.enqueueStream(ctx, conversationID, toolStream(c), false)
}

// queuedStream is a streaming command as it waits in its conversation's
// queue, with its Ack: a runner has frames in flight at every moment, and
// a text delta is made in one allocation, not five (a tool update has its
// closure besides).
type queuedStream struct {
	p    pending
	cmd  streamCmd
	text conv.StreamText // cmd.text, for a text delta
	ack  Ack
}

// textStream makes a text delta ready to queue.
func textStream(c conv.StreamText) *queuedStream {
	q := &queuedStream{text: c}
	q.cmd = streamCmd{messageID: c.MessageID, text: &q.text}
	return q
}

// toolStream makes a tool update ready to queue.
func toolStream(c conv.StreamTool) *queuedStream {
	return &queuedStream{cmd: streamCmd{messageID: c.MessageID, with: func(k conv.StreamLookups) conv.Command { c.Known = k; return c }}}
}

// enqueueStream queues a streaming command, whose outcome tells the
// message if message is set. It needs no build function: a run decides
// its commands from their streamCmd (decideRun), and a command decided
// alone makes one then (decideOne, streamBuild).
func (cq *commandQueue) enqueueStream(ctx context.Context, convID string, q *queuedStream, message bool) *Ack {
	q.p.ctx, q.p.stream, q.p.lean = ctx, &q.cmd, !message
	q.ack.p = &q.p
	cq.enqueue(convID, &q.p)
	return &q.ack
}

// FinalizeMessage ends a streaming message.
func (e *Engine) FinalizeMessage(ctx context.Context, conversationID string, c conv.FinalizeMessage) (*MessageResult, error) {
	return e.streamCommand(ctx, conversationID, c.MessageID, func(k conv.StreamLookups) conv.Command { c.Known = k; return c })
}

func (e *Engine) streamCommand(ctx context.Context, convID, messageID string, with func(conv.StreamLookups) conv.Command) (*MessageResult, error) {
	build := func(s conv.State) (conv.Command, error) {
		m, err := e.assembled(ctx, convID, messageID, s)
		return with(conv.StreamLookups{Message: m}), err
	}
	d, _, err := e.decide(ctx, convID, build, nil)
	if err != nil {
		return nil, err
	}
	return &MessageResult{Message: d.Result.Message, Seq: d.Result.Seq, Turn: d.Result.Turn, EndedPrompt: d.Result.EndedPrompt}, nil
}

// assembled returns a streaming message as assembled so far, from the cache
// or rebuilt from its row and the chunks after it; nil if it is not
// streaming. It returns errStale if the row is newer than s (another node
// wrote since). The conversation's lock must be held.
func (e *Engine) assembled(ctx context.Context, convID, id string, s conv.State) (*parley.Message, error) {
	c := e.entry(convID)
	if m, ok := c.streams[id]; ok {
		return m, nil
	}
	if _, ok := s.Streams.Get(id); !ok {
		return nil, nil
	}
	m, err := e.store.GetMessage(ctx, convID, id)
	if err != nil {
		return nil, err
	}
	if newerThan(m, s.LastSeq) {
		return nil, errStale
	}
	if err := AssembleMessage(ctx, e.store, m, s.LastSeq); err != nil {
		return nil, err
	}
	c.remember(m)
	return m, nil
}

// AssembleMessage brings a streaming message's row m up to seq upTo by
// applying its chunk events (text) and part.updated events (tool calls)
// after the row's UpdatedSeq: while a message streams, its row is rewritten
// only now and then, and the events after it hold the rest. It reads the
// log from st, a page of at most about feed.HistoryPageBytes at a time.
func AssembleMessage(ctx context.Context, st store.Reader, m *parley.Message, upTo int64) error {
	return eachEvent(ctx, st, m.ConversationID, m.UpdatedSeq, upTo, func(ev parley.Event) { ApplyStreamEvent(m, ev) })
}

// eachEvent calls f with each event of a conversation's log after seq
// after and up to seq upTo, in order, reading the log from st a page of at
// most about feed.HistoryPageBytes at a time.
func eachEvent(ctx context.Context, st store.Reader, conversationID string, after, upTo int64, f func(parley.Event)) error {
	for after < upTo {
		events, err := st.ReadEvents(ctx, store.ReadEventsParams{ConversationID: conversationID, After: after,
			Limit: min(feed.HistoryPage, int(upTo-after)), MaxBytes: feed.HistoryPageBytes})
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		for _, ev := range events {
			f(ev)
		}
		after = events[len(events)-1].Seq
	}
	return nil
}

// ApplyStreamEvent applies a chunk, part.updated or input.answered event to
// the streaming message m if the event is of m: its text, its change of a
// tool call or input request, or the end of an input request.
// It reports whether it changed m. Other events change nothing.
func ApplyStreamEvent(m *parley.Message, ev parley.Event) bool {
	switch ev.Type {
	case parley.EventChunk:
		if ch, err := parley.ParseChunk(ev.Data); err == nil && ch.MessageID == m.ID {
			m.AppendText(ch.Content)
			return true
		}
	case parley.EventPartUpdated:
		var u parley.PartUpdate
		if json.Unmarshal(ev.Data, &u) == nil && u.MessageID == m.ID {
			m.ApplyPart(u.Part)
			return true
		}
	case parley.EventInputAnswered:
		var a parley.InputAnswered
		if json.Unmarshal(ev.Data, &a) == nil && a.MessageID == m.ID {
			return m.ApplyInputAnswered(a)
		}
	}
	return false
}

// forReaders returns a copy of an assembled streaming message for readers:
// its UpdatedSeq is the seq it is complete as of, so that a client applies
// only the chunks after it.
func forReaders(m *parley.Message, asOf int64) *parley.Message {
	r := *m
	r.Parts = slices.Clone(m.Parts)
	r.UpdatedSeq = asOf
	return &r
}

// remember keeps a streaming message's assembly, or drops it once final.
func (c *conversation) remember(m *parley.Message) {
	if m == nil {
		return
	}
	if m.Status != parley.StatusStreaming {
		delete(c.streams, m.ID)
		return
	}
	if c.streams == nil {
		c.streams = make(map[string]*parley.Message)
	}
	c.streams[m.ID] = m
}

// MessageState returns a message as its runner continues it: a streaming
// one assembled from its row and the chunks after it, any other as
// stored. With other nodes writing, it reads holding the conversation's
// lock in the store, which waits for any append still under way there (a
// node that died with a commit in flight, say), so that nothing the runner
// sent before becomes durable after the answer, to be sent again. It
// returns ENOTFOUND.
func (e *Engine) MessageState(ctx context.Context, conversationID, messageID string) (*parley.Message, error) {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var m *parley.Message
	err = e.readFenced(ctx, c, conversationID, func(s conv.State) error {
		a, err := e.assembled(ctx, conversationID, messageID, s)
		if a != nil {
			m = forReaders(a, s.LastSeq)
			return err
		}
		if err == nil {
			m, err = e.store.GetMessage(ctx, conversationID, messageID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Streaming returns the messages of a conversation that stream now and
// that want chooses (by id and author), assembled so far, oldest first:
// each a copy for readers, complete as of the seq the conversation is at
// (its UpdatedSeq), so that a client applies only the chunks after it.
// What streams is read as of one state of the conversation, which the
// rows read from the store agree with, on one node or many. It returns
// ENOTFOUND for an unknown conversation.
func (e *Engine) Streaming(ctx context.Context, conversationID string, want func(messageID, agentID string) bool) ([]*parley.Message, error) {
	c, err := e.lockLoaded(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var out []*parley.Message
	err = e.readConsistent(ctx, c, conversationID, func(s conv.State) error {
		out = out[:0]
		for id, st := range s.Streams.All() {
			if !want(id, st.AgentID) {
				continue
			}
			m, err := e.assembled(ctx, conversationID, id, s)
			if err != nil {
				return err
			}
			if m != nil {
				out = append(out, forReaders(m, s.LastSeq))
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b *parley.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// StreamV1 appends text a runner of the first protocol streams in a v1
// conversation (conv.StreamV1).
func (e *Engine) StreamV1(ctx context.Context, conversationID string, c conv.StreamV1) (*MessageResult, error) {
	d, _, err := e.decide(ctx, conversationID, func(conv.State) (conv.Command, error) { return c, nil }, nil)
	if err != nil {
		return nil, err
	}
	return &MessageResult{Seq: d.Result.Seq, Turn: d.Result.Turn}, nil
}
