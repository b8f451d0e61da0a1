package conv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/parleyhq/parley"
)

// Streaming messages. A message started with PostMessage{Streaming}
// grows by StreamText (one small chunk event per delta) and StreamTool (one
// part.updated event per change of a tool call, carrying what changed), and
// ends with FinalizeMessage (a message.updated event with the whole
// message). Writing costs O(delta): the message's row is rewritten only at
// finalize and at checkpoints whose interval doubles as the message grows.
// An in-progress message is its row plus the chunk and part.updated events
// after the row's UpdatedSeq; the engine keeps it assembled in memory and
// rebuilds it so.

// Stream is what the rules keep of a message that is still streaming.
type Stream struct {
	AgentID string `json:"agentId"`
	Turn    int    `json:"turn"`
	TurnID  string `json:"turnId,omitempty"`
	// RowSeq is the seq as of which the stored row is complete.
	RowSeq int64 `json:"rowSeq"`
	// Chunks and Bytes count the chunk and part.updated events after RowSeq
	// and the bytes they carry (text, and tool calls' args, results, errors).
	Chunks int `json:"chunks,omitempty"`
	Bytes  int `json:"bytes,omitempty"`
	// RowChunks and RowBytes count the events and bytes the row holds.
	RowChunks int `json:"rowChunks,omitempty"`
	RowBytes  int `json:"rowBytes,omitempty"`
}

// checkpointDue says whether a delta rewrites the row: once the chunks or
// text since the row reach the limit, or what the row already holds if that
// is more. The interval doubles as the message grows, so all the rewrites of
// a message cost at most about twice its final size: O(n), not O(n²).
func (st Stream) checkpointDue(delta int, l Limits) bool {
	return st.Chunks+1 >= max(l.CheckpointChunks, st.RowChunks) || st.Bytes+delta >= max(l.CheckpointBytes, st.RowBytes)
}

// StreamLookups is what the engine knows of a streaming message.
type StreamLookups struct {
	// Message is the message as assembled so far (row plus chunks).
	Message *parley.Message
}

// StreamText appends a text delta to the actor's streaming message.
type StreamText struct {
	Actor
	MessageID string
	Delta     string
	Known     StreamLookups
}

// StreamTool adds or updates a tool-call part of the actor's streaming message.
type StreamTool struct {
	Actor
	MessageID string
	Tool      ToolUpdate
	Known     StreamLookups
}

// FinalizeMessage ends the actor's streaming message with a reason (end_turn,
// error, canceled), an optional error text and the final text. Finality
// says what it closes; left empty, it closes the writer's turn if the writer
// owns it (a delegate's response leaves the owner's turn open), and "none"
// keeps the turn open, as for a failover where a new message follows.
type FinalizeMessage struct {
	Actor
	MessageID string
	Reason    string
	Error     string
	FinalText string
	Finality  parley.Finality
	// EndsPrompt is set when the writer's runner ends its answer with this
	// finalize (its aborted, or a finalize with reason canceled): the prompt
	// dispatched to the writer ends with it, canceled, if the message
	// answers that prompt or the prompt was aborted (a steer, a stop).
	EndsPrompt bool
	// Failover is set when the runner keeps its turn open after a canceled
	// finalize (finality none): a retry follows, so the prompt ends with
	// it only if it was aborted; otherwise it stays with the runner for
	// the retry.
	Failover bool
	Known    StreamLookups
}

// stream checks that the actor may write to a streaming message and returns
// what the rules know of it.
func (d *decider) stream(a Actor, id string, known StreamLookups) (Stream, *parley.Message, error) {
	if err := d.checkOpen(); err != nil {
		return Stream{}, nil, err
	}
	st, ok := d.s.Streams.Get(id)
	switch {
	case !ok:
		return Stream{}, nil, parley.Errorf(parley.ENOTFOUND, "message %q is not streaming in this conversation", id)
	case st.AgentID != a.AgentID:
		return Stream{}, nil, parley.Errorf(parley.EFORBIDDEN, "message %s is written by %s, not %s", id, st.AgentID, a.AgentID)
	case known.Message == nil || known.Message.ID != id:
		return Stream{}, nil, parley.Errorf(parley.EINTERNAL, "message %s was not assembled before deciding", id)
	}
	m := *known.Message
	m.Parts = slices.Clone(m.Parts)
	return st, &m, nil
}

// streamInTurn is stream, for a write that adds to the message: its turn
// must still be open (checkStreamTurn).
func (d *decider) streamInTurn(a Actor, id string, known StreamLookups) (Stream, *parley.Message, error) {
	st, m, err := d.stream(a, id, known)
	if err == nil {
		err = d.checkStreamTurn(st, id)
	}
	return st, m, err
}

// grew records that event e added to streaming message m (st its stream):
// its row is written with it if checkpoint says so, and it is the result.
func (d *decider) grew(st Stream, m *parley.Message, e parley.Event, checkpoint bool) {
	if checkpoint {
		m.UpdatedSeq, m.UpdatedAt = e.Seq, parley.NewTime(d.env.Now)
		d.out.Messages = append(d.out.Messages, m)
	}
	d.out.Result = Result{Turn: st.Turn, Claimed: true, Seq: e.Seq, Message: m}
}

// turnOpen reports whether the turn a streaming message belongs to is still
// open. Turn 0 (a system message) is never closed.
func (d *decider) turnOpen(st Stream) bool {
	return st.Turn == 0 || (d.s.Open != nil && d.s.Open.Turn == st.Turn)
}

// checkStreamTurn refuses to add to a message whose turn has closed (it was
// aborted, or its owner closed it with another message): the right to write
// into a turn ends with the turn. Such a message can only be finalized.
func (d *decider) checkStreamTurn(st Stream, id string) error {
	if d.turnOpen(st) {
		return nil
	}
	return d.conflict(parley.ETURNCONFLICT, "turn %d of message %s is closed; the message can only be finalized", st.Turn, id)
}

func (d *decider) streamText(c StreamText) error {
	st, m, err := d.streamInTurn(c.Actor, c.MessageID, c.Known)
	if err != nil {
		return err
	}
	if c.Delta == "" {
		// Model APIs stream empty deltas: accepted, and nothing to write.
		d.out.Result = Result{Turn: st.Turn, Claimed: true, Message: m}
		return nil
	}
	if len(m.Content)+len(c.Delta) > d.env.Limits.MaxTextBytes {
		return parley.Errorf(parley.ETOOLARGE, "message %s would hold more than %d bytes of text", c.MessageID, d.env.Limits.MaxTextBytes)
	}
	if err := checkSize(c.MessageID, m.Size()+len(c.Delta), d.env.Limits); err != nil {
		return err
	}
	checkpoint := st.checkpointDue(len(c.Delta), d.env.Limits)
	e := d.emit(parley.EventChunk, st.Turn, st.TurnID, c.AgentID, parley.FinalityNone, parley.Chunk{MessageID: c.MessageID, Content: c.Delta, Checkpoint: checkpoint})
	m.AppendText(c.Delta)
	d.grew(st, m, e, checkpoint)
	return nil
}

func (d *decider) streamTool(c StreamTool) error {
	st, m, err := d.streamInTurn(c.Actor, c.MessageID, c.Known)
	if err != nil {
		return err
	}
	u := c.Tool
	if err := checkToolUpdate(m, u.Part(), d.env.Limits); err != nil {
		return err
	}
	// The event carries what changed, as the log stores it (compact JSON),
	// and the message is changed by exactly that, as readers change it.
	raw, err := json.Marshal(parley.PartUpdate{MessageID: c.MessageID, Part: changes(m, u)})
	if err != nil {
		return parley.Errorf(parley.EINVALID, "tool update: %v", err)
	}
	var pu parley.PartUpdate
	_ = json.Unmarshal(raw, &pu)
	m.ApplyTool(pu.Part)
	if err := checkSize(c.MessageID, m.Size(), d.env.Limits); err != nil {
		return err
	}
	pu.Checkpoint = st.checkpointDue(parley.PartBytes(pu.Part), d.env.Limits)
	e := d.emit(parley.EventPartUpdated, st.Turn, st.TurnID, c.AgentID, parley.FinalityNone, pu)
	d.grew(st, m, e, pu.Checkpoint)
	return nil
}

// checkToolUpdate checks a change p of a tool call of streaming message m:
// a tool-call part (a known call may leave its tool name out), and room
// for one more part if the call is new.
func checkToolUpdate(m *parley.Message, p parley.Part, l Limits) error {
	known := slices.ContainsFunc(m.Parts, func(q parley.Part) bool { return q.Type == parley.PartToolCall && q.CallID == p.CallID })
	p.Type = parley.PartToolCall
	if known && p.ToolName == "" {
		p.ToolName = "(unchanged)" // an update of a known call may leave its name out
	}
	if err := CheckPart(p); err != nil {
		return err
	}
	if !known && len(m.Parts) >= l.MaxParts {
		return parley.Errorf(parley.ETOOLARGE, "message %s has %d parts; the limit is %d", m.ID, len(m.Parts), l.MaxParts)
	}
	return nil
}

func (d *decider) finalize(c FinalizeMessage) error {
	st, m, err := d.stream(c.Actor, c.MessageID, c.Known)
	if err != nil {
		return err
	}
	switch c.Reason {
	case parley.FinishEndTurn, parley.FinishError, parley.FinishCanceled:
	default:
		return parley.Errorf(parley.EINVALIDVALUE, "finish reason %q is not one of end_turn, error, canceled", c.Reason)
	}
	// The writer owns the message's turn only while that turn is open: a
	// message whose turn was aborted or closed meanwhile closes nothing (it
	// must not close a later turn, which the writer may own too).
	owner := st.Turn > 0 && d.turnOpen(st) && d.s.Open.Owner == c.AgentID
	fin := c.Finality
	if fin == "" {
		// A response ends its writer's turn, unless the writer is a delegate
		// working inside someone else's turn.
		fin = parley.FinalityNone
		if owner {
			fin = parley.FinalityTurn
		}
	}
	switch {
	case !fin.Valid():
		return parley.Errorf(parley.EINVALIDVALUE, "finality %q is not one of none, turn, conversation", fin)
	case fin == parley.FinalityNone:
	case st.Turn == 0 && fin == parley.FinalityTurn:
		return parley.Errorf(parley.EINVALIDVALUE, "message %s is in turn 0 and cannot close a turn", c.MessageID)
	case st.Turn == 0:
	case !d.turnOpen(st):
		return d.conflict(parley.ETURNCONFLICT, "turn %d of message %s is closed; finalize it with finality none", st.Turn, c.MessageID)
	default:
		if err := d.checkCloser(turnPlan{turn: st.Turn, owner: owner}, c.AgentID, fin); err != nil {
			return err
		}
	}
	// What the writer adds must fit (the notes the server adds to tool
	// calls left running, and the finish part, always do: a message can
	// always be ended).
	if len(c.FinalText) > d.env.Limits.MaxTextBytes {
		return parley.Errorf(parley.ETOOLARGE, "finalText is %d bytes; the limit is %d", len(c.FinalText), d.env.Limits.MaxTextBytes)
	}
	if err := CheckFinalText(m, c.FinalText, d.env.Limits); err != nil {
		return err
	}
	if added := len(c.Error) + max(0, len(c.FinalText)-len(m.Content)); added > 0 {
		if err := checkSize(c.MessageID, m.Size()+added, d.env.Limits); err != nil {
			return err
		}
	}
	// A message that ends waits for nothing: its pending requests end
	// canceled, before the message does.
	d.cancelInputs(m, "", 0, []string{m.ID}, c.AgentID, ReasonFinalized)
	Finalize(m, c.Reason, c.Error, c.FinalText)
	m.Finality = fin
	d.rewrite(st, m, fin, c.AgentID)
	if a := d.s.Active(); c.EndsPrompt && c.Reason == parley.FinishCanceled && a != nil && a.Runner == c.AgentID && !d.s.Closed &&
		(a.Aborted || !c.Failover && (m.ReplyTo == a.ID || m.TurnID == a.Exchange())) {
		d.endPrompt(a, c.AgentID, true) // the runner aborted its answer: the prompt ends
	}
	if m.Channel != nil {
		// The reply goes back to the channel its prompt came from, at least
		// once, however it ended (the channel hears of an error or a stop
		// too): the outbox row is written with the message.
		now := parley.NewTime(d.env.Now)
		d.out.Deliveries = append(d.out.Deliveries, &parley.Delivery{ID: d.deliveryID(), ConversationID: m.ConversationID,
			MessageID: m.ID, Channel: *m.Channel, Content: m.Content, MessageStatus: m.Status, NextAttemptAt: now, CreatedAt: now})
	}
	return nil
}

// deliveryID is the id of the delivery of the event last emitted: made of
// the conversation, its epoch and the event's seq, and nothing a client
// chooses (not the message's id), so that no client can make it the key of
// another delivery. The webhook gets it as its Idempotency-Key.
func (d *decider) deliveryID() string {
	c := d.s.Conversation
	sum := sha256.Sum256([]byte(c.ID + "\x00" + c.Epoch + "\x00" + strconv.FormatInt(d.s.LastSeq, 10)))
	return "dl_" + hex.EncodeToString(sum[:16])
}

// rewrite writes the whole message as a message.updated event and its row.
func (d *decider) rewrite(st Stream, m *parley.Message, fin parley.Finality, agent string) {
	m.UpdatedSeq, m.UpdatedAt = d.s.LastSeq+1, parley.NewTime(d.env.Now)
	e := d.emit(parley.EventMessageUpdated, st.Turn, st.TurnID, agent, fin, m)
	d.out.Messages = append(d.out.Messages, m)
	d.out.Result = Result{Turn: st.Turn, Claimed: true, Seq: e.Seq, Message: m}
}

// applyStream keeps the Streams of s up to date with one event; m is the
// head of a message or message.updated event's data.
func applyStream(s State, e parley.Event, m messageHead) State {
	switch e.Type {
	case parley.EventMessage, parley.EventMessageUpdated:
		streaming := m.Status == parley.StatusStreaming
		old, known := s.Streams.Get(m.ID)
		switch {
		case streaming: // the row now holds everything so far
			s.Streams = s.Streams.With(m.ID, Stream{AgentID: e.AgentID, Turn: e.Turn, TurnID: e.TurnID, RowSeq: e.Seq,
				RowChunks: old.RowChunks + old.Chunks, RowBytes: old.RowBytes + old.Bytes})
		case known:
			s.Streams = s.Streams.Without(m.ID)
		}
	case parley.EventMessagesRemoved:
		var r parley.MessagesRemoved
		_ = json.Unmarshal(e.Data, &r)
		s.Streams = s.Streams.Without(r.MessageIDs...)
	case parley.EventChunk, parley.EventPartUpdated, parley.EventInputAnswered:
		id, bytes, checkpoint := streamDelta(e)
		if id == "" && e.Type == parley.EventChunk {
			return growText(s, e, bytes) // text no message holds yet (v1)
		}
		st, ok := s.Streams.Get(id)
		if !ok {
			return s
		}
		if checkpoint {
			st.RowChunks += st.Chunks + 1
			st.RowBytes += st.Bytes + bytes
			st.RowSeq, st.Chunks, st.Bytes = e.Seq, 0, 0
		} else {
			st.Chunks++
			st.Bytes += bytes
		}
		s.Streams = s.Streams.With(id, st)
	}
	return s
}

// streamDelta reads a chunk or part.updated event: the message it adds
// to, the bytes it carries, and whether the row was rewritten with it.
func streamDelta(e parley.Event) (id string, bytes int, checkpoint bool) {
	if e.Type == parley.EventChunk {
		c, _ := parley.ParseChunk(e.Data)
		return c.MessageID, len(c.Content), c.Checkpoint
	}
	if e.Type == parley.EventInputAnswered {
		var a parley.InputAnswered
		_ = json.Unmarshal(e.Data, &a)
		return a.MessageID, len(a.Answer), a.Checkpoint
	}
	var u parley.PartUpdate
	_ = json.Unmarshal(e.Data, &u)
	return u.MessageID, parley.PartBytes(u.Part), u.Checkpoint
}

// Revert removes a message and every message after it. An
// unknown message reverts nothing.
type Revert struct {
	Actor
	MessageID string
	// Known: the ids of the message and of every message after it, oldest
	// first, as the engine read them; empty if the message does not exist.
	Known []string
	// Authors are the agents that wrote them, in the same order.
	Authors []string
}

func (d *decider) revert(c Revert) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	if len(c.Known) == 0 {
		return nil // an unknown id does nothing
	}
	var removed []Stream // the streaming messages it removes
	for _, id := range c.Known {
		if st, ok := d.s.Streams.Get(id); ok {
			removed = append(removed, st)
		}
	}
	d.cancelInputs(nil, "", 0, c.Known, c.AgentID, ReasonReverted)
	e := d.emit(parley.EventMessagesRemoved, 0, "", c.AgentID, parley.FinalityNone, parley.MessagesRemoved{MessageIDs: c.Known})
	d.out.Removed = c.Known
	d.out.Result = Result{Seq: e.Seq}
	// A reverted answer stops: the prompt it answered (or whose own message
	// was reverted) is aborted, so that its runner is told and the queue
	// moves on.
	if a := d.s.Active(); a != nil && (slices.Contains(c.Known, a.ID) || slices.ContainsFunc(removed, func(st Stream) bool { return st.TurnID == a.Exchange() })) {
		d.abortActive(c.AgentID, ReasonReverted)
	}
	// The open turn that a removed message was streaming in closes, unless
	// another message still streams in it: nobody is left to close it.
	open := d.s.Open
	if open == nil || !slices.ContainsFunc(removed, func(st Stream) bool { return st.Turn == open.Turn }) {
		return nil
	}
	for _, st := range d.s.Streams.All() {
		if st.Turn == open.Turn {
			return nil
		}
	}
	d.emit(parley.EventTurnAborted, open.Turn, open.TurnID, c.AgentID, parley.FinalityTurn, parley.TurnRef{Turn: open.Turn, Reason: ReasonReverted})
	return nil
}
