package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// Init is what a subscriber learns first. Recovered is true when the stream
// continues exactly after the position the subscriber gave; otherwise it gets
// a snapshot (the latest messages) and the stream continues after Position.
type Init struct {
	Recovered    bool                `json:"recovered"`
	Position     parley.Position     `json:"position"`
	Conversation parley.Conversation `json:"conversation"`
	Head         parley.Head         `json:"head"`
	Guidance     *parley.Guidance    `json:"guidance"`
	Messages     []*parley.Message   `json:"messages,omitempty"`
	// Streaming is, in a snapshot, the text each agent streams in a v1
	// conversation that no message holds yet, as of Position, in the order
	// they started (at most Limits.MaxTextBytes of text in all).
	Streaming []parley.StreamingText `json:"streaming,omitempty"`
	// Bytes is about what a snapshot's messages and streaming texts weigh
	// in JSON (0 without a snapshot).
	Bytes int `json:"-"`
}

// Subscription is a live stream of one conversation: its Init, then on C
// every event after Init.Position exactly once, in seq order, with guidance
// between them (see feed.Subscription).
type Subscription struct {
	Init Init
	*feed.Subscription
}

// Subscribe starts a stream of a conversation. With from set and in the
// current epoch (or with no epoch), the stream resumes right after from.Seq; otherwise Init
// carries a snapshot. Live events are queued from before the history is read,
// and history and live events are merged by seq, so there is no gap and no
// duplicate. It returns ENOTFOUND for an unknown conversation.
func (e *Engine) Subscribe(ctx context.Context, conversationID string, from *parley.Position) (*Subscription, error) {
	var init Init
	s, err := e.hub.SubscribeFrom(ctx, conversationID, func(joined func()) (int64, bool, error) {
		var err error
		init, err = e.join(ctx, conversationID, from, joined)
		return init.Position.Seq, false, err
	})
	if err != nil {
		return nil, err
	}
	return &Subscription{Init: init, Subscription: s}, nil
}

// Follower is a live stream of one conversation that its reader pulls
// from (feed.Follower.Next), with no goroutine of its own: its Init, then
// every event after Init.Position exactly once, in seq order, with
// guidance between them. Close it when done.
type Follower struct {
	Init Init
	*feed.Follower
}

// Follow is Subscribe for a reader that pulls: what the streams to
// clients use, so that a subscriber costs no goroutine of the server's
// besides its connection's.
func (e *Engine) Follow(ctx context.Context, conversationID string, from *parley.Position) (*Follower, error) {
	var init Init
	f, err := e.hub.FollowFrom(func(joined func()) (int64, bool, error) {
		var err error
		init, err = e.join(ctx, conversationID, from, joined)
		return init.Position.Seq, init.Position.Seq == init.Head.LastSeq, err
	}, conversationID)
	if err != nil {
		return nil, err
	}
	return &Follower{Init: init, Follower: f}, nil
}

// join makes a subscriber's Init. It holds the conversation's write lock
// while it reads a snapshot, so that the snapshot is exactly the state at
// Init.Position: every message as of that seq, streaming ones assembled up
// to it; and calls joined under it (see feed.Join), so that a delete ends
// the subscriber if and only if it joined before. A conversation found
// gone meanwhile (deleted, or made again, on another node) is joined
// afresh: ENOTFOUND, or the conversation made again. It returns
// EUNAVAILABLE once the engine is closed.
func (e *Engine) join(ctx context.Context, id string, from *parley.Position, joined func()) (Init, error) {
	for again := true; ; again = false {
		c, err := e.lockLoaded(ctx, id)
		if err != nil {
			return Init{}, err
		}
		init, err := e.joinLocked(ctx, c, id, from)
		if err == nil {
			joined()
		}
		dropped := c.dropped
		c.mu.Unlock()
		if !dropped || !again {
			return init, err
		}
	}
}

// joinLocked is join for the conversation c, locked by the caller.
func (e *Engine) joinLocked(ctx context.Context, c *conversation, id string, from *parley.Position) (Init, error) {
	var init Init
	err := e.readConsistent(ctx, c, id, func(state conv.State) error {
		init = Init{Conversation: state.Conversation, Head: state.Head(e.opts.Now()), Guidance: e.guidance(id, state)}
		epoch := state.Conversation.Epoch
		if from != nil && (from.Epoch == epoch || from.Epoch == "") && from.Seq >= 0 && from.Seq <= state.LastSeq {
			init.Recovered = true
			init.Position = parley.Position{Seq: from.Seq, Epoch: epoch}
			return nil
		}
		init.Position = parley.Position{Seq: state.LastSeq, Epoch: epoch}
		var err error
		if init.Messages, init.Bytes, err = e.snapshot(ctx, id, state); err == nil {
			init.Streaming, err = pendingTexts(ctx, e.store, id, state)
		}
		for _, t := range init.Streaming {
			init.Bytes += len(t.Content)
		}
		return err
	})
	return init, err
}

// snapshot returns the messages a fresh subscriber starts from, oldest
// first: the newest SnapshotMessages and, before them, every older message
// still streaming, assembled up to state.LastSeq. Its size in JSON is
// bounded whatever the conversation holds: a message over
// SnapshotMessageBytes is summarized (parley.Message.Summarize: the
// client fetches it whole with GET …/messages/{id}), and once the messages
// taken reach SnapshotBytes, older finished messages are left out (a client
// pages back with GET …/messages) and older streaming ones summarized. So
// the messages weigh less than SnapshotBytes + SnapshotMessageBytes plus a
// summary of at most a few KiB per message counted; it returns what they
// weigh too. The conversation's lock must be held.
func (e *Engine) snapshot(ctx context.Context, id string, state conv.State) ([]*parley.Message, int, error) {
	budget := e.opts.SnapshotBytes
	var kept []*parley.Message
	held := make(map[string]bool)
	// take adds m, the next older message, as the bounds allow; size is its
	// size in JSON (0 for one still streaming, assembled here).
	take := func(m *parley.Message, size int) error {
		held[m.ID] = true
		streaming := m.Status == parley.StatusStreaming
		if streaming {
			a, err := e.assembled(ctx, id, m.ID, state)
			if err != nil {
				return err
			}
			if a != nil {
				m = forReaders(a, state.LastSeq)
			} else if m, err = e.store.GetMessage(ctx, id, m.ID); err != nil { // it ended: as stored
				return err
			}
			size = jsonSize(m)
		}
		switch {
		case m.Summarized != nil:
		case size > e.opts.SnapshotMessageBytes || (streaming && budget <= 0):
			m = m.Summarize(size)
		case budget <= 0:
			return nil // over the byte budget: older finished messages are paged with GET …/messages
		}
		if m.Summarized != nil {
			size = jsonSize(m)
		}
		budget -= size
		kept = append(kept, m)
		return nil
	}
	// The newest messages, newest first, about snapshotPageBytes of rows at
	// a time (a few rows first, then as many as rows of their size fill):
	// a large row is summarized before the next are read, and its text is
	// never decoded.
	before, page := int64(0), snapshotPage
	for left := e.opts.SnapshotMessages; left > 0 && budget > 0; {
		limit := min(left, page)
		rows, err := e.store.ListMessagesRaw(ctx, store.ListMessagesParams{ConversationID: id, Limit: limit, Latest: true, Before: before})
		if err != nil {
			return nil, 0, err
		}
		read := 0
		for i := range rows {
			read += len(rows[i].Data)
		}
		if len(rows) > 0 {
			page = max(1, snapshotPageBytes/max(1, read/len(rows)))
		}
		for i := len(rows) - 1; i >= 0; i-- {
			m, size, err := readRow(rows[i].Data, e.opts.SnapshotMessageBytes)
			rows[i].Data = nil // read: let it go
			if err == nil && newerThan(m, state.LastSeq) {
				err = errStale // written by another node since state: read again
			}
			if err == nil {
				err = take(m, size)
			}
			if err != nil {
				return nil, 0, err
			}
		}
		if len(rows) < limit {
			break // the conversation's first message
		}
		left, before = left-len(rows), rows[0].Seq
	}
	// Every message still streaming, however old.
	var older []*parley.Message
	for mid := range state.Streams.All() {
		if !held[mid] {
			m, err := e.store.GetMessage(ctx, id, mid)
			if err == nil && newerThan(m, state.LastSeq) {
				err = errStale
			}
			if err != nil {
				return nil, 0, err
			}
			older = append(older, m)
		}
	}
	slices.SortFunc(older, func(a, b *parley.Message) int { return cmp.Compare(b.Seq, a.Seq) })
	for _, m := range older {
		if err := take(m, 0); err != nil {
			return nil, 0, err
		}
	}
	slices.Reverse(kept)
	return kept, e.opts.SnapshotBytes - budget, nil
}

// pendingTexts reads from the log the texts agents stream in a v1
// conversation that no message holds yet (state.Texts), as of
// state.LastSeq: each agent's chunks that name no message, from its first
// on. They are in the order they started.
func pendingTexts(ctx context.Context, st store.Store, id string, state conv.State) ([]parley.StreamingText, error) {
	if len(state.Texts) == 0 {
		return nil, nil
	}
	type reading struct {
		parley.StreamingText
		text strings.Builder
	}
	texts := make(map[string]*reading, len(state.Texts))
	from := state.LastSeq
	for agent, t := range state.Texts {
		r := &reading{StreamingText: parley.StreamingText{AgentID: agent, Seq: t.Seq}}
		r.text.Grow(t.Bytes)
		texts[agent] = r
		from = min(from, t.Seq)
	}
	err := eachEvent(ctx, st, id, from-1, state.LastSeq, func(ev parley.Event) {
		r := texts[ev.AgentID]
		if ev.Type != parley.EventChunk || r == nil || ev.Seq < r.Seq {
			return
		}
		if ch, err := parley.ParseChunk(ev.Data); err == nil && ch.MessageID == "" {
			if ev.Seq == r.Seq {
				r.Turn, r.TurnID = ev.Turn, ev.TurnID
			}
			r.text.WriteString(ch.Content)
			r.UpdatedSeq = ev.Seq
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]parley.StreamingText, 0, len(texts))
	for _, r := range texts {
		r.Content = r.text.String()
		out = append(out, r.StreamingText)
	}
	slices.SortFunc(out, func(a, b parley.StreamingText) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// snapshotPage is how many rows a snapshot reads first, and
// snapshotPageBytes about how many bytes of rows it reads at a time after.
const (
	snapshotPage      = 8
	snapshotPageBytes = 4 << 20
)

// readRow decodes a message row for a snapshot: a finished row whose
// message is over maxBytes (Options.SnapshotMessageBytes) as its summary
// (without decoding its text), a streaming one as its head (it is
// assembled), others whole. size is the message's size in JSON.
func readRow(data []byte, maxBytes int) (*parley.Message, int, error) {
	if len(data) <= maxBytes/2 { // its text costs little to decode
		var m parley.Message
		size, err := store.DecodeRow(data, &m)
		return &m, size, err
	}
	head, size, err := store.ReadRowHead(data)
	switch {
	case err != nil:
		return nil, 0, err
	case head.Status == parley.StatusStreaming:
		return head, 0, nil
	case size > maxBytes:
		return head.Summarize(size), size, nil
	}
	var m parley.Message
	_, err = store.DecodeRow(data, &m)
	return &m, size, err
}

// jsonSize is the size of v in JSON, as a frame carries it.
func jsonSize(v any) int {
	var n byteCounter
	_ = json.NewEncoder(&n).Encode(v)
	return int(n) - 1 // Encode ends with a newline
}

// byteCounter counts what is written to it.
type byteCounter int

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}
