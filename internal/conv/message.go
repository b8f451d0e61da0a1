package conv

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

func (d *decider) postMessage(c PostMessage) error {
	if replay, err := d.idempotent(c.ClientRequestID, c.RequestHash, c.Known.Prior); replay {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	if err := checkMessageShape(c); err != nil {
		return err
	}
	if c.NeedsContent && !c.Streaming && !HasContent(c.Parts) {
		return parley.Errorf(parley.EINVALIDVALUE, "a message needs content: text, a tool call or an error")
	}
	if err := d.checkReplyChannel(c); err != nil {
		return err
	}
	c = d.answerPrompt(c)
	if c.Streaming && (len(c.Parts) > 0 || (c.Finality != "" && c.Finality != parley.FinalityNone)) {
		return parley.Errorf(parley.EINVALIDVALUE, "a streaming message starts with no parts and closes nothing; finalize it to close")
	}
	if !c.prompt {
		if err := d.taken("message", c.ID, c.Known.IDTaken); err != nil {
			return err
		}
	}
	fin := c.Finality
	if fin == "" {
		fin = parley.FinalityNone
	}
	plan, turnID, err := d.planMessageTurn(c, fin)
	if err != nil {
		return err
	}
	depth, err := d.threadDepth(c)
	if err != nil {
		return err
	}
	c.Parts = asStored(c.Parts)
	if err := checkMessageLimits(&parley.Message{ID: c.ID, Parts: c.Parts, Content: parley.TextContent(c.Parts), Metadata: c.Metadata}, 0, d.env.Limits); err != nil {
		return err
	}
	if c.Streaming {
		if err := d.checkStreaming(); err != nil {
			return err
		}
	}
	now := parley.NewTime(d.env.Now)
	m := &parley.Message{
		ID:             c.ID,
		ConversationID: d.s.Conversation.ID,
		Seq:            d.s.LastSeq + 1,
		Role:           c.Role,
		AgentID:        c.AgentID,
		Parts:          c.Parts,
		Content:        parley.TextContent(c.Parts),
		Status:         parley.StatusComplete,
		Turn:           plan.turn,
		TurnID:         turnID,
		ReplyTo:        c.ReplyTo,
		Depth:          depth,
		Finality:       fin,
		Next:           c.Next,
		RetryOf:        c.RetryOf,
		Channel:        c.Channel,
		Metadata:       c.Metadata,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	if m.Parts == nil {
		m.Parts = []parley.Part{}
	}
	if c.Streaming {
		m.Status, m.UpdatedSeq = parley.StatusStreaming, m.Seq
	}
	e := d.emit(parley.EventMessage, plan.turn, turnID, c.AgentID, fin, m)
	d.out.Messages = append(d.out.Messages, m)
	d.out.Result = Result{Turn: plan.turn, Claimed: plan.turn > 0, Seq: e.Seq, Message: m}
	return nil
}

// planMessageTurn places a message: system messages in turn 0, the others by
// the turn rules, and gives it its turnId.
func (d *decider) planMessageTurn(c PostMessage, fin parley.Finality) (turnPlan, string, error) {
	if c.Role == parley.RoleSystem {
		if !c.Admin {
			return turnPlan{}, "", parley.Errorf(parley.EFORBIDDEN, "only an admin token may write system messages")
		}
		if fin == parley.FinalityTurn {
			return turnPlan{}, "", parley.Errorf(parley.EINVALIDVALUE, "a system message is in turn 0 and cannot close a turn")
		}
		if c.Precondition != nil {
			return turnPlan{}, "", parley.Errorf(parley.EINVALIDVALUE, "a system message is in turn 0 and takes no precondition")
		}
		if t := c.TurnID; t != "" && t != d.s.LastTurnID && t != c.ID && !c.Known.TurnIDKnown {
			return turnPlan{}, "", parley.Errorf(parley.EINVALIDVALUE, "turnId %q names no message or turn of this conversation", t)
		}
		return turnPlan{turn: 0, owner: true}, c.TurnID, nil
	}
	plan, err := d.planTurn(c.AgentID, c.Precondition)
	if err != nil {
		return turnPlan{}, "", err
	}
	if err := d.checkCloser(plan, c.AgentID, fin); err != nil {
		return turnPlan{}, "", err
	}
	turnID, err := d.turnIDFor(plan, c.ID, c.Role, c.TurnID, c.Known)
	return plan, turnID, err
}

// threadDepth applies the threading rules and returns the
// message's number of ancestors. The parent must already exist and ids are
// unique, so a new message can never close a cycle.
func (d *decider) threadDepth(c PostMessage) (int, error) {
	if c.ReplyTo == "" {
		return 0, nil
	}
	if c.ReplyTo == c.ID {
		return 0, parley.Errorf(parley.EINVALIDTHREAD, "message %s cannot reply to itself", c.ID)
	}
	if c.Known.Parent == nil {
		return 0, parley.Errorf(parley.EINVALIDTHREAD, "replyTo %q names no message of this conversation", c.ReplyTo)
	}
	depth := c.Known.Parent.Depth + 1
	if max := d.env.Limits.MaxThreadDepth; depth >= max {
		return 0, parley.Errorf(parley.EINVALIDTHREAD, "the reply would have %d ancestors; a thread may have at most %d", depth, max-1).With("maxDepth", max)
	}
	return depth, nil
}

// checkMessageShape refuses values that are well-formed JSON but not a message.
func checkMessageShape(c PostMessage) error {
	switch {
	case !parley.ValidID(c.ID):
		return parley.Errorf(parley.EINVALIDVALUE, "message id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", c.ID)
	case !parley.ValidID(c.AgentID):
		return parley.Errorf(parley.EINVALIDVALUE, "agent id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", c.AgentID)
	case !c.Role.Valid():
		return parley.Errorf(parley.EINVALIDVALUE, "role %q is not one of user, assistant, system, tool", c.Role)
	case c.Finality != "" && !c.Finality.Valid():
		return parley.Errorf(parley.EINVALIDVALUE, "finality %q is not one of none, turn, conversation", c.Finality)
	case c.ReplyTo != "" && !parley.ValidID(c.ReplyTo):
		return parley.Errorf(parley.EINVALIDTHREAD, "replyTo %q is not a valid message id", c.ReplyTo)
	case c.TurnID != "" && !parley.ValidID(c.TurnID):
		return parley.Errorf(parley.EINVALIDVALUE, "turnId %q is not a valid id", c.TurnID)
	case c.RetryOf != "" && !parley.ValidID(c.RetryOf):
		return parley.Errorf(parley.EINVALIDVALUE, "retryOf %q is not a valid message id", c.RetryOf)
	case c.Next != "" && !parley.ValidID(c.Next):
		return parley.Errorf(parley.EINVALIDVALUE, "next %q is not a valid agent id", c.Next)
	case c.Next != "" && c.Finality != parley.FinalityTurn:
		return parley.Errorf(parley.EINVALIDVALUE, "next names the agent after a closed turn; it needs finality \"turn\"")
	case len(c.Metadata) > 0 && !json.Valid(c.Metadata):
		return parley.Errorf(parley.EINVALID, "metadata is not valid JSON")
	}
	if err := checkChannel(c.Channel); err != nil {
		return err
	}
	for i, p := range c.Parts {
		if err := CheckPart(p); err != nil {
			return parley.Errorf(parley.EINVALIDVALUE, "parts[%d]: %s", i, err.(*parley.Error).Message)
		}
	}
	return nil
}

// CheckMessage checks a message that Decide did not write (an imported
// row, or the data of an imported message or message.updated event)
// against what the rules hold every message to: its shape (ids, role,
// finality, channel, metadata, parts, status), its size (parts, metadata,
// text, the whole: as checkMessageLimits and checkSize count them), its
// depth (fewer ancestors than MaxThreadDepth) and its numbers. It returns
// the error a live write of it would get.
func CheckMessage(m *parley.Message, l Limits) error {
	if l == (Limits{}) {
		l = DefaultLimits
	}
	c := PostMessage{Actor: Actor{AgentID: m.AgentID}, ID: m.ID, Role: m.Role, Parts: m.Parts, ReplyTo: m.ReplyTo, TurnID: m.TurnID,
		Finality: m.Finality, Next: m.Next, Channel: m.Channel, Metadata: m.Metadata, RetryOf: m.RetryOf}
	if err := checkMessageShape(c); err != nil {
		return err
	}
	switch m.Status {
	case parley.StatusStreaming, parley.StatusComplete, parley.StatusCanceled, parley.StatusError:
	default:
		return parley.Errorf(parley.EINVALIDVALUE, "status %q is not one of streaming, complete, canceled, error", m.Status)
	}
	switch {
	case m.Seq < 1 || m.UpdatedSeq < 0 || m.Turn < 0:
		return parley.Errorf(parley.EINVALIDVALUE, "seq %d, updatedSeq %d and turn %d: a seq is 1 or more, the others 0 or more", m.Seq, m.UpdatedSeq, m.Turn)
	case m.Depth < 0 || m.Depth >= l.MaxThreadDepth:
		return parley.Errorf(parley.EINVALIDTHREAD, "depth %d: a thread may have at most %d ancestors", m.Depth, l.MaxThreadDepth-1).With("maxDepth", l.MaxThreadDepth)
	case m.Summarized != nil:
		return parley.Errorf(parley.EINVALIDVALUE, "a stored message is never summarized")
	}
	if g := m.Legacy; g != nil {
		if len(g.SeenBy) > l.MaxParticipants {
			return parley.Errorf(parley.ETOOLARGE, "legacy.seenBy names %d agents; the limit is %d", len(g.SeenBy), l.MaxParticipants)
		}
		for _, a := range g.SeenBy {
			if !parley.ValidID(a) {
				return parley.Errorf(parley.EINVALIDVALUE, "legacy.seenBy %q is not a valid agent id", a)
			}
		}
	}
	// Its content may hold more than its parts' text (a final text).
	if text := parley.TextContent(m.Parts); len(text) > len(m.Content) {
		return checkMessageLimits(&parley.Message{ID: m.ID, Parts: m.Parts, Content: text, Metadata: m.Metadata}, notesBytes(m), l)
	}
	return checkMessageLimits(m, notesBytes(m), l)
}

// HasContent reports whether parts hold something to show: text, a tool
// call or an error (a finish part alone says only why nothing came).
func HasContent(parts []parley.Part) bool {
	return slices.ContainsFunc(parts, func(p parley.Part) bool {
		return p.Type == parley.PartToolCall || p.Type == parley.PartError || p.Type == parley.PartText && p.Text != ""
	})
}

// checkChannel refuses a channel without a type (an id) and an id of
// 1-256 bytes; nil is no channel.
func checkChannel(ch *parley.Channel) error {
	if ch != nil && (!parley.ValidID(ch.Type) || ch.ID == "" || len(ch.ID) > 256) {
		return parley.Errorf(parley.EINVALIDVALUE, "channel needs a type (an id) and an id of 1-256 bytes")
	}
	return nil
}

// MaxPartWordBytes bounds a part's status and reason, whatever its kind:
// they are not counted in a message's size (parley.Message.Size), and the
// words they hold are short.
const MaxPartWordBytes = 16

// CheckPart validates one part: a known kind with the fields that kind needs.
// The fields a message's size does not count (call id, tool name, status,
// reason) are bounded whatever the kind, so that a part weighs at most
// what Limits.MaxMessageJSON allows it. It returns EINVALIDVALUE saying
// what is wrong.
func CheckPart(p parley.Part) error {
	if len(p.CallID) > parley.MaxIDLen || len(p.ToolName) > parley.MaxIDLen || len(p.Status) > MaxPartWordBytes || len(p.Reason) > MaxPartWordBytes {
		return parley.Errorf(parley.EINVALIDVALUE, "a part's callId and toolName are at most %d bytes, its status and reason at most %d", parley.MaxIDLen, MaxPartWordBytes)
	}
	switch p.Type {
	case parley.PartText:
		return nil
	case parley.PartToolCall:
		switch {
		case p.CallID == "" || len(p.CallID) > parley.MaxIDLen:
			return parley.Errorf(parley.EINVALIDVALUE, "a tool-call part needs a callId of 1-128 bytes")
		case p.ToolName == "" || len(p.ToolName) > parley.MaxIDLen:
			return parley.Errorf(parley.EINVALIDVALUE, "a tool-call part needs a toolName of 1-128 bytes")
		}
		switch p.Status {
		case parley.ToolPending, parley.ToolRunning, parley.ToolCompleted, parley.ToolError:
			return nil
		}
		return parley.Errorf(parley.EINVALIDVALUE, "tool-call status %q is not one of pending, running, completed, error", p.Status)
	case parley.PartFinish:
		switch p.Reason {
		case parley.FinishEndTurn, parley.FinishError, parley.FinishCanceled:
			return nil
		}
		return parley.Errorf(parley.EINVALIDVALUE, "finish reason %q is not one of end_turn, error, canceled", p.Reason)
	case parley.PartError:
		return nil
	}
	return parley.Errorf(parley.EINVALIDVALUE, "unknown part type %q (known: text, tool-call, finish, error)", p.Type)
}

// checkMessageLimits bounds the size of message m: its parts, metadata,
// text (its content) and whole size (parley.Message.Size, less uncounted
// bytes: the notes Finalize adds).
func checkMessageLimits(m *parley.Message, uncounted int, l Limits) error {
	if len(m.Parts) > l.MaxParts {
		return parley.Errorf(parley.ETOOLARGE, "a message may have at most %d parts; it has %d", l.MaxParts, len(m.Parts))
	}
	if len(m.Metadata) > l.MaxMetadataBytes {
		return parley.Errorf(parley.ETOOLARGE, "metadata is %d bytes; the limit is %d", len(m.Metadata), l.MaxMetadataBytes)
	}
	if len(m.Content) > l.MaxTextBytes {
		return parley.Errorf(parley.ETOOLARGE, "the message's text is %d bytes; the limit is %d", len(m.Content), l.MaxTextBytes)
	}
	return checkSize(m.ID, m.Size()-uncounted, l)
}

// asStored returns parts with their tool calls' args and results as the
// log stores them (compact JSON, with <, > and & escaped), so that a
// message's size is the same whether it was posted whole or streamed.
func asStored(parts []parley.Part) []parley.Part {
	var out []parley.Part
	for i, p := range parts {
		args, errA := stored(p.Args)
		result, errR := stored(p.Result)
		if errA != nil || errR != nil || (bytes.Equal(args, p.Args) && bytes.Equal(result, p.Result)) {
			continue
		}
		if out == nil {
			out = slices.Clone(parts)
		}
		out[i].Args, out[i].Result = args, result
	}
	if out == nil {
		return parts
	}
	return out
}

// stored is raw JSON as the log stores it.
func stored(raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	return json.Marshal(raw)
}

// checkSize refuses a message whose size (parley.Message.Size) would pass
// MaxMessageBytes.
func checkSize(id string, size int, l Limits) error {
	if size > l.MaxMessageBytes {
		return parley.Errorf(parley.ETOOLARGE, "message %s would be %d bytes (text, tool calls, errors and metadata); the limit is %d", id, size, l.MaxMessageBytes).
			With("maxMessageBytes", l.MaxMessageBytes)
	}
	return nil
}

// checkStreaming refuses to start one more streaming message when
// MaxStreaming already stream in the conversation.
func (d *decider) checkStreaming() error {
	if n, max := d.s.Streams.Len(), d.env.Limits.MaxStreaming; n >= max {
		return parley.Errorf(parley.EBUSY, "%d messages are streaming in this conversation, the most there may be at once; finalize one first", n).
			With("maxStreaming", max).WithHead(d.base.Head(d.env.Now))
	}
	return nil
}

// answered is the prompt a response answers: the one dispatched to its
// writer, for an assistant message (or a tool row, which the first runner
// protocol writes for a call) that replies to nothing else.
func (d *decider) answered(c PostMessage) *parley.QueuedPrompt {
	a := d.s.Active()
	if (c.Role != parley.RoleAssistant && c.Role != parley.RoleTool) || a == nil || a.Runner != c.AgentID || c.ReplyTo != "" && c.ReplyTo != a.ID {
		return nil
	}
	return a
}

// checkReplyChannel holds the rule that a streamed answer goes back to the
// channel of the prompt it answers, and to no other: a runner may repeat
// that channel, but never name one of its choosing (its reply would be
// posted there by the operator's webhook).
func (d *decider) checkReplyChannel(c PostMessage) error {
	if !c.Streaming || c.Channel == nil {
		return nil
	}
	if a := d.answered(c); a != nil && a.Channel != nil && *a.Channel == *c.Channel {
		return nil
	}
	return parley.Errorf(parley.EFORBIDDEN, "message %s names channel %s %q, which is not the channel of the prompt it answers: a reply goes only to the channel its prompt came from; leave the channel out", c.ID, c.Channel.Type, c.Channel.ID)
}

// answerPrompt applies the rule that a response answers the prompt
// dispatched to its writer (see answered): with no replyTo, it replies to
// that prompt's message (a root, so depth 0, in the prompt's exchange),
// and it goes back to the prompt's channel.
func (d *decider) answerPrompt(c PostMessage) PostMessage {
	a := d.answered(c)
	if a == nil {
		return c
	}
	if c.Channel == nil {
		c.Channel = a.Channel
	}
	if c.ReplyTo == "" {
		turnID := a.TurnID
		if turnID == "" {
			turnID = a.ID
		}
		c.ReplyTo, c.Known.Parent = a.ID, &ParentRef{ID: a.ID, TurnID: turnID}
	}
	return c
}
