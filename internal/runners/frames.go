package runners

import (
	"context"
	"encoding/json"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// The runner protocol, both ways. The server sends a runner prompt, abort,
// revert and error frames (and acks, which the transport writes); a runner
// sends the frames of Frame, which a Session applies through the engine.

// Each frame the server sends names its conversation on an agent-wide
// connection (conversationId); on a conversation's own connection it is
// implied, and left out.

// PromptFrame is the frame that hands a runner a prompt to answer.
func PromptFrame(conversationID string, p *engine.Dispatched) []byte {
	b, _ := json.Marshal(struct {
		Type           string `json:"type"`
		ConversationID string `json:"conversationId,omitempty"`
		*engine.Dispatched
	}{"prompt", conversationID, p})
	return b
}

// AbortFrame asks a runner to stop answering a prompt.
func AbortFrame(conversationID, promptID string) []byte {
	return frame("abort", conversationID, promptID)
}

// RevertFrame tells a runner that a message and everything after it were
// removed.
func RevertFrame(conversationID, messageID string) []byte {
	return frame("revert", conversationID, messageID)
}

func frame(typ, conversationID, messageID string) []byte {
	b, _ := json.Marshal(struct {
		Type           string `json:"type"`
		ConversationID string `json:"conversationId,omitempty"`
		MessageID      string `json:"messageId"`
	}{typ, conversationID, messageID})
	return b
}

// ErrorFrame tells a runner of an error: on a conversation's own
// connection one that ends it, on an agent-wide one (conversationId set)
// one that ends its work in that conversation.
func ErrorFrame(conversationID string, err *parley.Error) []byte {
	b, _ := json.Marshal(struct {
		Type           string            `json:"type"`
		ConversationID string            `json:"conversationId,omitempty"`
		Error          map[string]string `json:"error"`
	}{"error", conversationID, map[string]string{"code": err.Code, "message": err.Message}})
	return b
}

// Frame is any frame a runner sends. On this wire turnId is the id of the
// assistant message being assembled, and messageId the prompt's. replyTo
// and finality say what a response answers and what its finalize closes
// (by default the runner's turn).
type Frame struct {
	Type string `json:"type"`
	// ConversationID names the frame's conversation: required on an
	// agent-wide connection, and if given on a conversation's own, it
	// must be that conversation.
	ConversationID    string          `json:"conversationId,omitempty"`
	TurnID            string          `json:"turnId,omitempty"`
	ChannelType       string          `json:"channelType,omitempty"`
	ChannelID         string          `json:"channelId,omitempty"`
	OpencodeSessionID string          `json:"opencodeSessionId,omitempty"`
	ReplyTo           string          `json:"replyTo,omitempty"`
	Delta             string          `json:"delta,omitempty"`
	Content           string          `json:"content,omitempty"` // the text of a v1 stream or result frame
	CallID            string          `json:"callId,omitempty"`
	ToolName          string          `json:"toolName,omitempty"`
	Status            string          `json:"status,omitempty"`
	Args              json.RawMessage `json:"args,omitempty"`
	Result            json.RawMessage `json:"result,omitempty"`
	Error             string          `json:"error,omitempty"`
	Reason            string          `json:"reason,omitempty"`
	FinalText         string          `json:"finalText,omitempty"`
	Finality          parley.Finality `json:"finality,omitempty"`
	MessageIDs        []string        `json:"messageIds,omitempty"`
	RetryOf           string          `json:"retryOf,omitempty"`
	// MessageID names a prompt (the messageId of the prompt and abort frames
	// the server sends), so that complete and aborted end exactly it.
	MessageID string `json:"messageId,omitempty"`

	// The fields of message.part.input-request (see parley.InputRequest;
	// toolName, args, status and reason are above), and requestId of
	// input.ack.
	RequestID  string               `json:"requestId,omitempty"`
	Kind       string               `json:"kind,omitempty"`
	ToolCallID string               `json:"toolCallId,omitempty"`
	Title      string               `json:"title,omitempty"`
	Detail     string               `json:"detail,omitempty"`
	Schema     json.RawMessage      `json:"schema,omitempty"`
	Options    []parley.InputOption `json:"options,omitempty"`
	Multiple   bool                 `json:"multiple,omitempty"`
	ExpiresAt  parley.Time          `json:"expiresAt,omitzero"`
	Answerers  []string             `json:"answerers,omitempty"`
}

// Session is one runner connection's side of the protocol: who it is, which
// message it is assembling (the target of aborted and error), and the
// prompt its last frame ended by aborting it (which a complete right after
// it is for). It is used by one goroutine at a time.
type Session struct {
	eng    *engine.Engine
	conv   string
	act    conv.Actor
	active string
	ended  string
	// canceled is set when the runner's last answer ended canceled keeping
	// its turn open (finality none: a retry may follow) and its prompt
	// stayed dispatched, until a retry begins: its complete then ends the
	// prompt canceled.
	canceled bool
	format   string // the conversation's messageFormat, once read
}

// Session returns the protocol state of a new runner connection of act to
// a conversation.
func (d *Dispatcher) Session(conversationID string, act conv.Actor) *Session {
	return &Session{eng: d.eng, conv: conversationID, act: act}
}

// Submit applies one frame through the engine, as Apply does, but returns
// as soon as a text delta or a tool update is queued, with the function
// that waits for its outcome: a runner that keeps frames in flight has its
// deltas written together (see engine.StreamTextAsync). Other frames are
// applied before it returns. Call the functions in the order of the frames.
func (rs *Session) Submit(ctx context.Context, f *Frame) *engine.Ack {
	if f.Type == "message.part.text-delta" || f.Type == "message.part.tool-update" {
		if err := rs.check(ctx, f); err != nil {
			return engine.Acked(nil, err)
		}
		rs.ended = ""
		if f.Type == "message.part.text-delta" {
			return rs.eng.StreamTextAsync(ctx, rs.conv, conv.StreamText{Actor: rs.act, MessageID: f.TurnID, Delta: f.Delta})
		}
		return rs.eng.StreamToolAsync(ctx, rs.conv, conv.StreamTool{Actor: rs.act, MessageID: f.TurnID, Tool: conv.ToolUpdate{
			CallID: f.CallID, ToolName: f.ToolName, Status: f.Status, Args: f.Args, Result: f.Result, Error: f.Error}})
	}
	res, err := rs.Apply(ctx, f)
	return engine.Acked(res, err)
}

// check refuses a frame that names another conversation or a malformed
// prompt id, and learns the conversation's message format once.
func (rs *Session) check(ctx context.Context, f *Frame) error {
	if f.ConversationID != "" && f.ConversationID != rs.conv {
		return parley.Errorf(parley.EINVALIDVALUE, "conversationId %.200q is not the conversation of this connection (%s)", f.ConversationID, rs.conv)
	}
	if f.MessageID != "" && !parley.ValidID(f.MessageID) {
		return parley.Errorf(parley.EINVALIDVALUE, "messageId %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", f.MessageID)
	}
	if rs.format == "" {
		return rs.eng.Require(ctx, rs.conv, func(s conv.State) error { rs.format = s.Conversation.MessageFormat; return nil })
	}
	return nil
}

// Apply applies one frame through the engine. The result's Seq is what the
// ack carries (0 when nothing was written), and Message is set for
// message.state. A refused frame changes nothing.
func (rs *Session) Apply(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	ended := rs.ended
	rs.ended = ""
	if err := rs.check(ctx, f); err != nil {
		return nil, err
	}
	eng, id := rs.eng, rs.conv
	if rs.format == "v1" {
		if res, handled, err := rs.applyV1(ctx, f); handled || err != nil {
			return res, err
		}
	}
	switch f.Type {
	case "message.create":
		// Without replyTo, the rules make the response answer the prompt
		// dispatched to this runner.
		m := conv.PostMessage{Actor: rs.act, ID: f.TurnID, Role: parley.RoleAssistant, ReplyTo: f.ReplyTo, Streaming: true, RetryOf: f.RetryOf}
		if f.ChannelType != "" || f.ChannelID != "" {
			m.Channel = &parley.Channel{Type: f.ChannelType, ID: f.ChannelID}
		}
		if f.OpencodeSessionID != "" {
			m.Metadata, _ = json.Marshal(map[string]string{"opencodeSessionId": f.OpencodeSessionID})
		}
		res, err := eng.PostMessage(ctx, id, m)
		if err == nil {
			rs.active, rs.canceled = f.TurnID, false // a retry answers again
		}
		return res, err
	case "message.part.text-delta":
		return eng.StreamText(ctx, id, conv.StreamText{Actor: rs.act, MessageID: f.TurnID, Delta: f.Delta})
	case "message.part.tool-update":
		return eng.StreamTool(ctx, id, conv.StreamTool{Actor: rs.act, MessageID: f.TurnID, Tool: conv.ToolUpdate{
			CallID: f.CallID, ToolName: f.ToolName, Status: f.Status, Args: f.Args, Result: f.Result, Error: f.Error}})
	case "message.finalize":
		// A canceled answer that keeps the runner's turn open (finality
		// none) is a failover: a retry follows, and the prompt stays.
		return rs.finalize(ctx, f.TurnID, f.Reason, "", f.FinalText, f.Finality, f.Finality == parley.FinalityNone)
	case "aborted":
		return rs.aborted(ctx, f)
	case "error":
		msg := f.Error
		if msg == "" {
			msg = "the runner failed"
		}
		return rs.finalize(ctx, rs.target(f), parley.FinishError, msg, "", f.Finality, false)
	case "message.state":
		return rs.state(ctx, f.TurnID)
	case "message.part.input-request":
		return rs.askInput(ctx, f)
	case "input.ack":
		return rs.ackInput(ctx, f)
	case "input.withdraw":
		return rs.withdrawInput(ctx, f)
	case "reverted":
		// Not sent back to the runners: it came from one.
		res, err := eng.Revert(ctx, id, rs.act, f.MessageIDs...)
		if err != nil {
			return nil, err
		}
		return &engine.MessageResult{Seq: res.Seq}, nil
	case "complete":
		prompt := f.MessageID
		if prompt == "" {
			// Right after an aborted that ended a prompt, a complete is for
			// that prompt: it must never end the one dispatched next.
			prompt = ended
		}
		// An answer that ended canceled, and that no retry followed, ends
		// its prompt canceled.
		res, err := eng.CompletePrompt(ctx, id, conv.CompletePrompt{Actor: rs.act, ID: prompt, Aborted: rs.canceled})
		rs.canceled = false
		if err != nil {
			return nil, err
		}
		return &engine.MessageResult{Seq: res.Seq}, nil
	}
	if f.Type == "stream" || f.Type == "result" || f.Type == "tool" {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "%s frames are for conversations made with messageFormat v1; this one is %s (message.create, message.part.text-delta, message.part.tool-update, message.finalize)", f.Type, rs.format)
	}
	return nil, parley.Errorf(parley.EINVALIDVALUE, "unknown runner frame type %q (known: message.create, message.part.text-delta, message.part.tool-update, message.finalize, message.part.input-request, input.ack, input.withdraw, aborted, error, complete, reverted, message.state; and in v1 conversations stream, result, tool)", f.Type)
}

// target is the message aborted and error apply to: the one named, else the
// one this runner created last.
func (rs *Session) target(f *Frame) string {
	if f.TurnID == "" {
		f.TurnID = rs.active
	}
	return f.TurnID
}

// finalize ends a message of the runner's: a canceled one ends the prompt
// it answers, unless failover says a retry follows (see
// conv.FinalizeMessage.Failover).
func (rs *Session) finalize(ctx context.Context, messageID, reason, errText, finalText string, fin parley.Finality, failover bool) (*engine.MessageResult, error) {
	canceled := reason == parley.FinishCanceled
	res, err := rs.eng.FinalizeMessage(ctx, rs.conv, conv.FinalizeMessage{Actor: rs.act, MessageID: messageID, Reason: reason,
		Error: errText, FinalText: finalText, Finality: fin, EndsPrompt: canceled, Failover: failover})
	if err == nil && messageID == rs.active {
		rs.active = ""
	}
	if err == nil {
		rs.ended = res.EndedPrompt
		rs.canceled = canceled && res.EndedPrompt == ""
	}
	return res, err
}

// aborted answers an abort: the runner's message (the one named, else the
// one it created last) ends canceled, and the prompt it was answering ends.
// It is all a runner needs to send after an abort. A message that has
// already ended (finalized, or reverted) is no error: the prompt still ends.
func (rs *Session) aborted(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	if target := rs.target(f); target != "" {
		res, err := rs.finalize(ctx, target, parley.FinishCanceled, "", "", f.Finality, false)
		if parley.ErrorCode(err) != parley.ENOTFOUND {
			return res, err
		}
		if rs.active == target {
			rs.active = ""
		}
	}
	// No message of the runner's was streaming, so none ends canceled to
	// close the turn: the messages it finished (with finality none) left
	// the turn open. The answer is over, so its turn is aborted, and the
	// floor is free when the next prompt is dispatched.
	if f.Finality != parley.FinalityNone {
		if err := rs.abortOwnTurn(ctx); err != nil {
			return nil, err
		}
	}
	res, err := rs.eng.CompletePrompt(ctx, rs.conv, conv.CompletePrompt{Actor: rs.act, ID: f.MessageID, Aborted: true})
	rs.canceled = false
	if err != nil {
		return nil, err
	}
	rs.ended = res.EndedPrompt
	return &engine.MessageResult{Seq: res.Seq}, nil
}

// abortOwnTurn aborts the turn the runner's agent holds open while it
// answers a prompt: its answer was stopped with no message of it left to
// end canceled. A runner answering no prompt has no answer to stop, and
// the turn is left to whoever else of its agent writes in it.
func (rs *Session) abortOwnTurn(ctx context.Context) error {
	var answering bool
	err := rs.eng.Require(ctx, rs.conv, func(s conv.State) error {
		a := s.Active()
		answering = s.Open != nil && s.Open.Owner == rs.act.AgentID && a != nil && a.Runner == rs.act.AgentID
		return nil
	})
	if err != nil || !answering {
		return err
	}
	_, err = rs.eng.AbortTurn(ctx, rs.conv, conv.AbortTurn{Actor: rs.act, Reason: conv.ReasonAborted})
	return err
}

// ownsTurn reports whether the runner's agent owns the open turn.
func (rs *Session) ownsTurn(ctx context.Context) (owns bool, err error) {
	err = rs.eng.Require(ctx, rs.conv, func(s conv.State) error {
		owns = s.Open != nil && s.Open.Owner == rs.act.AgentID
		return nil
	})
	return owns, err
}

// state answers message.state: a reconnecting runner asks where its
// message stands, and continues it from there.
func (rs *Session) state(ctx context.Context, messageID string) (*engine.MessageResult, error) {
	m, err := rs.eng.MessageState(ctx, rs.conv, messageID)
	if err != nil {
		return nil, err
	}
	if m.AgentID != rs.act.AgentID {
		return nil, parley.Errorf(parley.EFORBIDDEN, "message %s is written by %s", messageID, m.AgentID)
	}
	if m.Status == parley.StatusStreaming {
		rs.active = m.ID // aborted and error now apply to it
	}
	return &engine.MessageResult{Message: m}, nil
}
