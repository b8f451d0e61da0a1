package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
)

// runnerFrame is any frame a runner sends (seed 001's runner protocol). On
// this wire turnId is the id of the assistant message being assembled.
// replyTo and finality are Parley's additions: the message a response
// answers, and what its finalize closes (by default the runner's turn).
type runnerFrame struct {
	Type              string          `json:"type"`
	TurnID            string          `json:"turnId,omitempty"`
	ChannelType       string          `json:"channelType,omitempty"`
	ChannelID         string          `json:"channelId,omitempty"`
	OpencodeSessionID string          `json:"opencodeSessionId,omitempty"`
	ReplyTo           string          `json:"replyTo,omitempty"`
	Delta             string          `json:"delta,omitempty"`
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
}

// maxRunnerFrame bounds one frame from a runner.
const maxRunnerFrame = 1 << 20

// runner serves GET /v1/conversations/{id}/runner: a WebSocket over which an
// agent streams its responses. Every frame that made something durable is
// answered {"type":"ack","seq":N}; a refused frame is answered
// {"type":"error","turnId":…,"error":{code,message}} and changes nothing.
func (s *Server) runner(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	act, err := actor(who, r.URL.Query().Get("agentId"))
	if err == nil {
		err = s.takesPart(r, r.PathValue("id"), act) // 404 unknown, 403 for an agent that takes no part
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	// Revoking the token ends the connection: an error frame, then close.
	cut := newCutoff()
	release, ok := s.connect(w, who, cut.end)
	if !ok {
		return
	}
	defer release()
	// One writer sends both the replies and what the engine pushes (prompts,
	// aborts, reverts), in order. A runner that cannot keep up is dropped.
	out := make(chan []byte, 256)
	done := make(chan struct{})
	defer close(done)
	overflow := make(chan struct{})
	var once sync.Once
	push := func(frame []byte) {
		select {
		case out <- frame:
		case <-done:
		default:
			once.Do(func() { close(overflow) })
		}
	}
	// The runner is attached before its handshake completes, so that
	// nothing pushed once it is connected is lost: the frames wait in out.
	// While it is attached it gets prompts and its agent's streaming
	// messages wait for it; when it leaves, its prompt goes back to the
	// queue and its messages wait the grace period, then end canceled.
	// Deleting the conversation pushes an error frame, then nil: close.
	defer s.eng.AttachRunner(r.PathValue("id"), act.AgentID, push, func() { push(nil) })()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(maxRunnerFrame)
	go func() {
		for {
			select {
			case frame := <-out:
				if frame == nil {
					c.Close(statusDeleted, "conversation deleted")
					return
				}
				wctx, cancel := context.WithTimeout(context.Background(), s.opts.WriteTimeout)
				err := c.Write(wctx, websocket.MessageText, frame)
				cancel()
				if err != nil {
					c.CloseNow()
					return
				}
			case <-overflow:
				c.CloseNow()
				return
			case <-cut.c:
				s.closeCut(c, cut.err)
				return
			case <-done:
				return
			}
		}
	}()
	rs := &runnerSession{s: s, conv: r.PathValue("id"), act: act}
	ctx := context.Background()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return // the runner went away; what it made durable stays
		}
		if cut.ended() {
			continue // nothing more is applied; the writer is closing
		}
		push(rs.handle(ctx, data))
	}
}

// runnerSession is one runner connection: who it is, which message it is
// assembling (the target of aborted and error), and the prompt its last
// frame ended by aborting it (which a complete right after it is for).
type runnerSession struct {
	s      *Server
	conv   string
	act    conv.Actor
	active string
	ended  string
}

// handle applies one frame and returns the reply frame.
func (rs *runnerSession) handle(ctx context.Context, data []byte) []byte {
	var f runnerFrame
	res, err := rs.apply(ctx, data, &f)
	if err != nil {
		body := errorBody(err)
		body["type"], body["turnId"] = "error", f.TurnID
		b, _ := json.Marshal(body)
		return b
	}
	ack := map[string]any{"type": "ack", "turnId": f.TurnID, "seq": res.Seq}
	if f.Type == "message.state" {
		ack["message"] = res.Message
	}
	b, _ := json.Marshal(ack)
	return b
}

func (rs *runnerSession) apply(ctx context.Context, data []byte, f *runnerFrame) (*engine.MessageResult, error) {
	ended := rs.ended
	rs.ended = ""
	if err := decodeJSON(bytes.NewReader(data), maxRunnerFrame, f); err != nil {
		return nil, err
	}
	if f.MessageID != "" && !parley.ValidID(f.MessageID) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "messageId %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", f.MessageID)
	}
	eng, id := rs.s.eng, rs.conv
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
			rs.active = f.TurnID
		}
		return res, err
	case "message.part.text-delta":
		return eng.StreamText(ctx, id, conv.StreamText{Actor: rs.act, MessageID: f.TurnID, Delta: f.Delta})
	case "message.part.tool-update":
		return eng.StreamTool(ctx, id, conv.StreamTool{Actor: rs.act, MessageID: f.TurnID, Tool: conv.ToolUpdate{
			CallID: f.CallID, ToolName: f.ToolName, Status: f.Status, Args: f.Args, Result: f.Result, Error: f.Error}})
	case "message.finalize":
		return rs.finalize(ctx, f.TurnID, f.Reason, "", f.FinalText, f.Finality)
	case "aborted":
		return rs.aborted(ctx, f)
	case "error":
		msg := f.Error
		if msg == "" {
			msg = "the runner failed"
		}
		return rs.finalize(ctx, rs.target(f), parley.FinishError, msg, "", f.Finality)
	case "message.state":
		return rs.state(ctx, f.TurnID)
	case "reverted":
		res, err := eng.Revert(ctx, id, rs.act, false, f.MessageIDs...)
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
		res, err := eng.CompletePrompt(ctx, id, conv.CompletePrompt{Actor: rs.act, ID: prompt})
		if err != nil {
			return nil, err
		}
		return &engine.MessageResult{Seq: res.Seq}, nil
	}
	return nil, parley.Errorf(parley.EINVALIDVALUE, "unknown runner frame type %q (known: message.create, message.part.text-delta, message.part.tool-update, message.finalize, aborted, error, complete, reverted, message.state)", f.Type)
}

// target is the message aborted and error apply to: the one named, else the
// one this runner created last.
func (rs *runnerSession) target(f *runnerFrame) string {
	if f.TurnID == "" {
		f.TurnID = rs.active
	}
	return f.TurnID
}

func (rs *runnerSession) finalize(ctx context.Context, messageID, reason, errText, finalText string, fin parley.Finality) (*engine.MessageResult, error) {
	// A runner's canceled answer ends the prompt it answers.
	res, err := rs.s.eng.FinalizeMessage(ctx, rs.conv, conv.FinalizeMessage{Actor: rs.act, MessageID: messageID, Reason: reason,
		Error: errText, FinalText: finalText, Finality: fin, EndsPrompt: reason == parley.FinishCanceled})
	if err == nil && messageID == rs.active {
		rs.active = ""
	}
	if err == nil {
		rs.ended = res.EndedPrompt
	}
	return res, err
}

// aborted answers an abort: the runner's message (the one named, else the
// one it created last) ends canceled, and the prompt it was answering ends.
// It is all a runner needs to send after an abort. A message that has
// already ended (finalized, or reverted) is no error: the prompt still ends.
func (rs *runnerSession) aborted(ctx context.Context, f *runnerFrame) (*engine.MessageResult, error) {
	if target := rs.target(f); target != "" {
		res, err := rs.finalize(ctx, target, parley.FinishCanceled, "", "", f.Finality)
		if parley.ErrorCode(err) != parley.ENOTFOUND {
			return res, err
		}
		if rs.active == target {
			rs.active = ""
		}
	}
	res, err := rs.s.eng.CompletePrompt(ctx, rs.conv, conv.CompletePrompt{Actor: rs.act, ID: f.MessageID, Aborted: true})
	if err != nil {
		return nil, err
	}
	rs.ended = res.EndedPrompt
	return &engine.MessageResult{Seq: res.Seq}, nil
}

// state answers message.state: a reconnecting runner asks where its
// message stands, and continues it from there.
func (rs *runnerSession) state(ctx context.Context, messageID string) (*engine.MessageResult, error) {
	m, err := rs.s.eng.MessageState(ctx, rs.conv, messageID)
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
