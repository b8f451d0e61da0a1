package engine

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// View is a conversation as readers see it: its settings, head and guidance.
type View struct {
	Conversation parley.Conversation `json:"conversation"`
	Head         parley.Head         `json:"head"`
	Guidance     *parley.Guidance    `json:"guidance"`
}

// MessageResult is the answer to PostMessage.
type MessageResult struct {
	Message *parley.Message `json:"message"`
	Seq     int64           `json:"seq"`
	Turn    int             `json:"turn"`
	// Replayed is true when this is the stored result of an earlier request
	// with the same client request id.
	Replayed bool `json:"-"`
	// EndedPrompt is the prompt a runner's finalize ended, if any.
	EndedPrompt string `json:"-"`
}

// TraceResult is the answer to PostTrace.
type TraceResult struct {
	Event    parley.Event `json:"event"`
	Replayed bool         `json:"-"`
}

// TurnResult is the answer to the turn commands (claim, reset, abort, delegate).
type TurnResult struct {
	conv.Result
	// Written is false when the command wrote nothing (a repeated reset or abort).
	Written  bool             `json:"written"`
	Head     parley.Head      `json:"head"`
	Guidance *parley.Guidance `json:"guidance"`
}

// CreateConversation validates and stores a new conversation; the server
// makes its id unless c.ID is set, and always makes its epoch. It returns
// EBUSY if the id is taken.
func (e *Engine) CreateConversation(ctx context.Context, c parley.Conversation) (*View, error) {
	if c.ID == "" {
		c.ID = NewID()
	}
	c.Epoch = parley.NewEpoch()
	s, events, err := conv.Create(c, e.env())
	if err != nil {
		return nil, err
	}
	state, queue, err := conv.EncodeStored(s, events...)
	if err != nil {
		return nil, err
	}
	if err := e.store.CreateConversation(ctx, store.CreateConversationParams{Conversation: s.Conversation, Members: conv.Members(s.Conversation), Events: events, State: state, Queue: queue}); err != nil {
		return nil, err
	}
	e.dropStale(c.ID, c.Epoch)
	e.hub.Publish(c.ID, events, e.guidance(c.ID, s))
	return e.view(s), nil
}

// Require applies a rule of who may do what (conv.State.CanRead, say) to a
// conversation's current state. It returns ENOTFOUND for an unknown
// conversation, or the rule's error.
func (e *Engine) Require(ctx context.Context, id string, rule func(conv.State) error) error {
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return err
	}
	s := c.state
	c.mu.Unlock()
	return rule(s)
}

// Conversation returns a conversation's view. It returns ENOTFOUND.
func (e *Engine) Conversation(ctx context.Context, id string) (*View, error) {
	c, err := e.lockLoaded(ctx, id)
	if err != nil {
		return nil, err
	}
	s := c.state
	c.mu.Unlock()
	return e.view(s), nil
}

// MaxTitleFilter is the longest title a list may be filtered by, in bytes.
const MaxTitleFilter = 200

// ListConversations pages over conversations, most recently active first
// (see store.Store.ListConversations): those p.Member takes part in (all
// of them without one), narrowed by p's filters.
func (e *Engine) ListConversations(ctx context.Context, p store.ListConversationsParams) ([]*View, string, error) {
	if len(p.Title) > MaxTitleFilter {
		return nil, "", parley.Errorf(parley.EINVALIDVALUE, "title filter is %d bytes; at most %d", len(p.Title), MaxTitleFilter)
	}
	recs, next, err := e.store.ListConversations(ctx, p)
	if err != nil {
		return nil, "", err
	}
	views := make([]*View, 0, len(recs))
	for _, r := range recs {
		s, err := stateOf(r)
		if err == nil && s.LastSeq < r.LastSeq {
			s, err = foldTail(ctx, e.store, s, r.LastSeq)
		}
		if err != nil {
			return nil, "", err
		}
		views = append(views, e.view(s))
	}
	return views, next, nil
}

// foldTail brings a state read from a stored snapshot up to the log's
// head, reading the log from r: a snapshot is rewritten only every so
// many streamed events (see snapshotDue).
func foldTail(ctx context.Context, r store.Reader, s conv.State, head int64) (conv.State, error) {
	for s.LastSeq < head {
		events, err := r.ReadEvents(ctx, store.ReadEventsParams{ConversationID: s.Conversation.ID, After: s.LastSeq, Limit: feed.HistoryPage, MaxBytes: feed.HistoryPageBytes})
		if err != nil || len(events) == 0 {
			return s, err
		}
		s = conv.Evolve(s, events...)
	}
	return s, nil
}

func (e *Engine) view(s conv.State) *View {
	return &View{Conversation: s.Conversation, Head: s.Head(e.opts.Now()), Guidance: e.guidance(s.Conversation.ID, s)}
}

// PostMessage writes a whole message. A message without an id gets a UUIDv7.
// It returns the errors of conv.Decide (409 codes carry the head), and
// ENOTFOUND for an unknown conversation.
func (e *Engine) PostMessage(ctx context.Context, conversationID string, m conv.PostMessage) (*MessageResult, error) {
	// A UUIDv7 made here cannot be taken, so only a client's id is looked up
	// (the store would still refuse a clash: see conv.Names).
	lookupID := m.ID
	if m.ID == "" {
		m.ID = NewID()
	}
	if err := retryReply(ctx, e.store, conversationID, &m); err != nil {
		return nil, err
	}
	build := func(conv.State) (conv.Command, error) {
		known, err := lookups(ctx, e.store, conversationID, m.AgentID, m.ClientRequestID, lookupID, m.ReplyTo, m.TurnID)
		m.Known = known
		return m, err
	}
	respond := func(d conv.Decision) (*store.Idempotency, error) {
		r := d.Result
		return e.idempotency(conversationID, m.AgentID, m.ClientRequestID, m.RequestHash, r.Seq, MessageResult{Message: r.Message, Seq: r.Seq, Turn: r.Turn})
	}
	d, _, err := e.decide(ctx, conversationID, build, respond)
	if err != nil {
		return nil, err
	}
	if d.Replay != nil {
		var r MessageResult
		err := json.Unmarshal(d.Replay, &r)
		r.Replayed = true
		return &r, err
	}
	return &MessageResult{Message: d.Result.Message, Seq: d.Result.Seq, Turn: d.Result.Turn}, nil
}

// retryReply makes a retry (RetryOf) that names no replyTo reply to what
// the failed message it retries replied to, whichever way that one ended:
// the prompt it answered, which the retry answers too if it is still
// being answered, and never another prompt dispatched since. A failed
// message that is not the writer's, or not found, changes nothing (the
// rules decide on the message as sent).
func retryReply(ctx context.Context, st store.Store, conversationID string, m *conv.PostMessage) error {
	if m.RetryOf == "" || m.ReplyTo != "" || !parley.ValidID(m.RetryOf) {
		return nil
	}
	failed, err := st.GetMessage(ctx, conversationID, m.RetryOf)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	if failed.AgentID == m.AgentID && failed.ReplyTo != m.ID {
		m.ReplyTo = failed.ReplyTo
	}
	return nil
}

// PostTrace writes a trace event. It returns the errors of conv.Decide.
func (e *Engine) PostTrace(ctx context.Context, conversationID string, t conv.PostTrace) (*TraceResult, error) {
	if t.ID == "" {
		t.ID = NewID()
	}
	build := func(conv.State) (conv.Command, error) {
		known, err := lookups(ctx, e.store, conversationID, t.AgentID, t.ClientRequestID, "", "", t.TurnID)
		t.Known = known
		return t, err
	}
	respond := func(d conv.Decision) (*store.Idempotency, error) {
		return e.idempotency(conversationID, t.AgentID, t.ClientRequestID, t.RequestHash, d.Result.Seq, TraceResult{Event: d.Events[len(d.Events)-1]})
	}
	d, _, err := e.decide(ctx, conversationID, build, respond)
	if err != nil {
		return nil, err
	}
	if d.Replay != nil {
		var r TraceResult
		err := json.Unmarshal(d.Replay, &r)
		r.Replayed = true
		return &r, err
	}
	return &TraceResult{Event: d.Events[len(d.Events)-1]}, nil
}

// Claim claims the next turn for the actor.
func (e *Engine) Claim(ctx context.Context, conversationID string, c conv.ClaimTurn) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

// Reset resets the actor's open turn, or with c.Claim claims the next one.
func (e *Engine) Reset(ctx context.Context, conversationID string, c conv.ResetTurn) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

// AbortTurn closes the actor's open turn with a tombstone.
func (e *Engine) AbortTurn(ctx context.Context, conversationID string, c conv.AbortTurn) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

// Delegate lets another agent write into the actor's open turn.
func (e *Engine) Delegate(ctx context.Context, conversationID string, c conv.Delegate) (*TurnResult, error) {
	return e.turnCommand(ctx, conversationID, c)
}

func (e *Engine) turnCommand(ctx context.Context, id string, cmd conv.Command) (*TurnResult, error) {
	d, s, err := e.decide(ctx, id, func(conv.State) (conv.Command, error) { return cmd, nil }, nil)
	if err != nil {
		return nil, err
	}
	now := e.opts.Now()
	written := false
	for _, ev := range d.Events {
		written = written || ev.Type != parley.EventClaimExpired
	}
	return &TurnResult{Result: d.Result, Written: written, Head: s.Head(now), Guidance: e.guidance(id, s)}, nil
}

// lookups reads what the rules need from the store: an earlier write with the
// same client request id (then nothing else is needed), whether the id of
// the message (or prompt) is taken, the replied-to parent, and whether an
// explicit turnId is known.
func lookups(ctx context.Context, st store.Store, convID, agentID, key, id, replyTo, turnID string) (conv.Lookups, error) {
	var k conv.Lookups
	if key != "" {
		rec, err := st.GetIdempotency(ctx, convID, agentID, key)
		switch {
		case err == nil:
			k.Prior = &conv.Prior{RequestHash: rec.RequestHash, Response: rec.Response}
			return k, nil
		case parley.ErrorCode(err) != parley.ENOTFOUND:
			return k, err
		}
	}
	// Messages are looked up by their keys, not their rows: a write that
	// replies to a large message costs what a small one does.
	if id != "" {
		taken, err := st.IDTaken(ctx, convID, id)
		if err != nil {
			return k, err
		}
		k.IDTaken = taken
	}
	if replyTo != "" && parley.ValidID(replyTo) {
		p, err := st.MessageKey(ctx, convID, replyTo)
		switch {
		case err == nil:
			k.Parent = &conv.ParentRef{ID: p.ID, TurnID: p.TurnID, Depth: p.Depth}
		case parley.ErrorCode(err) != parley.ENOTFOUND:
			return k, err
		}
	}
	if turnID != "" && parley.ValidID(turnID) {
		found, err := exists(st.MessageKey(ctx, convID, turnID))
		if err != nil {
			return k, err
		}
		if !found {
			ks, err := st.ListMessageKeys(ctx, store.ListMessagesParams{ConversationID: convID, TurnID: turnID, Limit: 1})
			if err != nil {
				return k, err
			}
			found = len(ks) > 0
		}
		k.TurnIDKnown = found
	}
	return k, nil
}

func exists(_ *store.MessageKey, err error) (bool, error) {
	switch parley.ErrorCode(err) {
	case "":
		return true, nil
	case parley.ENOTFOUND:
		return false, nil
	}
	return false, err
}

func (e *Engine) idempotency(convID, agentID, key, hash string, seq int64, result any) (*store.Idempotency, error) {
	if key == "" {
		return nil, nil
	}
	resp, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	return &store.Idempotency{ConversationID: convID, AgentID: agentID, Key: key, RequestHash: hash, Seq: seq, Response: resp, Time: parley.NewTime(e.opts.Now())}, nil
}
