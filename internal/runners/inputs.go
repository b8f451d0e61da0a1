package runners

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// redeliverTimeout bounds the reads of a redelivery.
const redeliverTimeout = 10 * time.Second

// Input requests on the runner protocol. A runner asks with a
// message.part.input-request frame and acknowledges an outcome with
// input.ack; it is sent input.answered when a request of its agent ends
// (answered, expired or canceled), and again, with input.pending for each
// request still pending, whenever a prompt of the conversation is handed
// to it or it attaches to the conversation, until it acknowledges: a
// runner that reconnects, or one of its agent's on another node, loses no
// outcome.

// inputAnsweredFrame is the input.answered frame of the end of a request
// of message messageID.
func inputAnsweredFrame(conversationID string, a parley.InputAnswered) []byte {
	b, _ := json.Marshal(struct {
		Type           string          `json:"type"`
		ConversationID string          `json:"conversationId,omitempty"`
		TurnID         string          `json:"turnId"`
		RequestID      string          `json:"requestId"`
		Status         string          `json:"status"`
		Answer         json.RawMessage `json:"answer,omitempty"`
		AnsweredBy     string          `json:"answeredBy,omitempty"`
		AnsweredAt     parley.Time     `json:"answeredAt"`
		Reason         string          `json:"reason,omitempty"`
	}{"input.answered", conversationID, a.MessageID, a.RequestID, a.Status, a.Answer, a.AnsweredBy, a.AnsweredAt, a.Reason})
	return b
}

// inputPendingFrame is the input.pending frame of a request still pending
// in message messageID: the request as it was asked.
func inputPendingFrame(conversationID, messageID string, p parley.Part) []byte {
	p.Type = ""
	b, _ := json.Marshal(struct {
		Type           string `json:"type"`
		ConversationID string `json:"conversationId,omitempty"`
		TurnID         string `json:"turnId"`
		parley.Part
	}{"input.pending", conversationID, messageID, p})
	return b
}

// askInput applies a message.part.input-request frame.
func (rs *Session) askInput(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	r := parley.InputRequest{RequestID: f.RequestID, Kind: f.Kind, ToolCallID: f.ToolCallID, ToolName: f.ToolName, Args: f.Args,
		Title: f.Title, Detail: f.Detail, Schema: f.Schema, Options: f.Options, Multiple: f.Multiple, ExpiresAt: f.ExpiresAt, Answerers: f.Answerers}
	return rs.eng.AskInput(ctx, rs.conv, conv.AskInput{Actor: rs.act, MessageID: f.TurnID, Request: r})
}

// ackInput applies an input.ack frame.
func (rs *Session) ackInput(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	if !parley.ValidID(f.RequestID) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "requestId %q is not a valid id", f.RequestID)
	}
	seq, err := rs.eng.AckInput(ctx, rs.conv, conv.AckInput{Actor: rs.act, RequestID: f.RequestID})
	if err != nil {
		return nil, err
	}
	return &engine.MessageResult{Seq: seq}, nil
}

// withdrawInput applies an input.withdraw frame.
func (rs *Session) withdrawInput(ctx context.Context, f *Frame) (*engine.MessageResult, error) {
	if !parley.ValidID(f.RequestID) {
		return nil, parley.Errorf(parley.EINVALIDVALUE, "requestId %q is not a valid id", f.RequestID)
	}
	seq, err := rs.eng.WithdrawInput(ctx, rs.conv, conv.WithdrawInput{Actor: rs.act, RequestID: f.RequestID, Reason: f.Reason})
	if err != nil {
		return nil, err
	}
	return &engine.MessageResult{Seq: seq}, nil
}

// pushAnswers sends the runner of the conversation that asks each request
// an input.answered event ended the outcome (s is the state after them).
func (d *Dispatcher) pushAnswers(conversationID string, s conv.State, events []parley.Event) {
	for _, ev := range events {
		if ev.Type != parley.EventInputAnswered {
			continue
		}
		var a parley.InputAnswered
		if json.Unmarshal(ev.Data, &a) != nil {
			continue
		}
		in, ok := s.Inputs[a.RequestID]
		if !ok {
			continue
		}
		if h := d.newestOf(conversationID, in.AgentID); h != nil {
			h.push(inputAnsweredFrame(h.frameConversation(conversationID), a))
		}
	}
}

// redeliverInputs sends h, in the background, the outcome of every request
// of its agent in the conversation that its runners have not acknowledged,
// and every request still pending.
func (d *Dispatcher) redeliverInputs(conversationID string, h *handle) {
	d.background(func() {
		ctx, cancel := context.WithTimeout(context.Background(), redeliverTimeout)
		defer cancel()
		var ended, pending []string
		var messages = map[string]string{}
		err := d.eng.Require(ctx, conversationID, func(s conv.State) error {
			ended, pending = s.Unacked(h.agentID)
			for _, id := range append(ended, pending...) {
				messages[id] = s.Inputs[id].MessageID
			}
			return nil
		})
		if err != nil || len(messages) == 0 {
			return
		}
		read := map[string]*parley.Message{}
		for _, id := range append(ended, pending...) {
			mid := messages[id]
			m, ok := read[mid]
			if !ok {
				m, err = d.eng.MessageState(ctx, conversationID, mid)
				if err != nil {
					m = nil
				}
				read[mid] = m
			}
			if m == nil {
				continue
			}
			for _, p := range m.Parts {
				if p.Type != parley.PartInputRequest || p.RequestID != id {
					continue
				}
				if p.Status == parley.InputStatusPending {
					h.push(inputPendingFrame(h.frameConversation(conversationID), mid, p))
				} else {
					h.push(inputAnsweredFrame(h.frameConversation(conversationID), parley.InputAnswered{MessageID: mid, RequestID: id,
						Status: p.Status, Answer: p.Answer, AnsweredBy: p.AnsweredBy, AnsweredAt: p.AnsweredAt, Reason: p.Reason}))
				}
			}
		}
	})
}
