package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
)

// The Vercel AI SDK's chat (useChat with DefaultChatTransport): POST
// /v1/chat asks, GET /v1/chat/{id}/stream resumes. Both answer with the UI
// message stream protocol: SSE "data: <chunk>" lines ending with
// "data: [DONE]". Only fields that every supported version of the `ai`
// package lists are sent (5.0's first releases refuse any other), and the
// answer is built from the conversation's log (answer.go), so a resumed
// stream holds exactly what the first held.

// MaxChatBodyBytes bounds the body of POST /v1/chat and POST /v1/ag-ui:
// it carries the whole chat's messages, of which only the last is kept
// (and bounded as every prompt is).
const MaxChatBodyBytes = 16 << 20

// chatRequest is what DefaultChatTransport posts: the chat's id, its
// messages, why it posts (trigger, messageId), and the caller's own body
// fields: the agent asked (to) and, for an admin token, who asks (agentId).
type chatRequest struct {
	ID        string      `json:"id"`
	Messages  lastMessage `json:"messages"`
	Trigger   string      `json:"trigger,omitempty"`
	MessageID string      `json:"messageId,omitempty"`
	To        string      `json:"to,omitempty"`
	AgentID   string      `json:"agentId,omitempty"`
}

// Triggers of a chat request.
const (
	triggerSubmit     = "submit-message"
	triggerRegenerate = "regenerate-message"
)

// uiMessage is a UI message as far as a prompt needs it. Its other fields
// (metadata, a part's state) are the client's and are not read.
type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

// lastMessage decodes a JSON array of UI messages one at a time, keeping
// only the last: a long chat sends every message each time, and only the
// last is asked.
type lastMessage struct {
	last  *uiMessage
	count int
}

// UnmarshalJSON implements json.Unmarshaler.
func (l *lastMessage) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data)) // no copy: the body is large
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return parley.Errorf(parley.EINVALID, "messages must be an array of UI messages")
	}
	for dec.More() {
		var m uiMessage
		if err := dec.Decode(&m); err != nil {
			return parley.Errorf(parley.EINVALID, "messages[%d] is not a UI message {id, role, parts}: %s", l.count, strings.TrimPrefix(err.Error(), "json: "))
		}
		l.last = &m
		l.count++
	}
	return nil
}

// promptText is the text of the last message, which must be the user's,
// with text parts only.
func (l *lastMessage) promptText() (id, text string, err error) {
	m := l.last
	switch {
	case m == nil:
		return "", "", parley.Errorf(parley.EINVALIDVALUE, "messages is empty: the last message is the user's question")
	case m.Role != string(parley.RoleUser):
		return "", "", parley.Errorf(parley.EINVALIDVALUE, "the last message is the %q's; it must be the user's question", m.Role)
	case !parley.ValidID(m.ID):
		return "", "", parley.Errorf(parley.EINVALIDVALUE, "the last message's id %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", m.ID)
	}
	var b strings.Builder
	for i, p := range m.Parts {
		if p.Type != "text" {
			return "", "", parley.Errorf(parley.EINVALIDVALUE, "the last message's part %d is %q: a prompt takes text parts only", i, p.Type)
		}
		b.WriteString(p.Text)
	}
	if b.Len() == 0 {
		return "", "", parley.Errorf(parley.EINVALIDVALUE, "the last message has no text")
	}
	return m.ID, b.String(), nil
}

// postChat asks the chat's conversation (made on first use) the last user
// message, as the caller, and streams the answer.
func (s *Server) postChat(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		s.refuse(w, r, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot ask", who.Kind))
		return
	}
	// The answer is a stream, a connection of the token: its bound is
	// checked before the body (up to 16 MiB) is read.
	ctx, done, ok := s.connectStream(w, r, who)
	if !ok {
		return
	}
	defer done()
	var req chatRequest
	if err := s.decodeBody(w, r, MaxChatBodyBytes, &req); err != nil {
		writeErr(w, s.log, err)
		return
	}
	act, err := actor(who, req.AgentID)
	if err == nil {
		err = checkChat(&req)
	}
	var userID, text string
	if err == nil {
		userID, text, err = req.Messages.promptText()
	}
	if err == nil {
		err = s.checkPromptSize(text)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if err := s.ensureConversation(r.Context(), who, act, req.ID, req.To); err != nil {
		writeErr(w, s.log, err)
		return
	}
	again := req.Trigger == triggerRegenerate || req.MessageID != ""
	if again {
		if err := s.revertExchange(r.Context(), req.ID, act, req.MessageID); err != nil {
			writeErr(w, s.log, err)
			return
		}
	}
	a, from, err := s.ask(r.Context(), req.ID, act, userID, text, req.To, !again)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	s.streamChat(ctx, w, req.ID, a, from)
}

// checkPromptSize refuses a prompt over the text limit before anything is
// written (a conversation made on first use included).
func (s *Server) checkPromptSize(text string) error {
	if limit := s.eng.Limits().MaxTextBytes; limit > 0 && len(text) > limit {
		return parley.Errorf(parley.ETOOLARGE, "the question is %d bytes of text; the limit is %d", len(text), limit)
	}
	return nil
}

// checkChat checks a chat request's ids and trigger.
func checkChat(req *chatRequest) error {
	switch {
	case !parley.ValidID(req.ID):
		return parley.Errorf(parley.EINVALIDVALUE, "id (the chat's, and its conversation's) %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", req.ID)
	case req.Trigger != "" && req.Trigger != triggerSubmit && req.Trigger != triggerRegenerate:
		return parley.Errorf(parley.EINVALIDVALUE, "trigger %q is not one of %s, %s", req.Trigger, triggerSubmit, triggerRegenerate)
	case req.MessageID != "" && !parley.ValidID(req.MessageID):
		return parley.Errorf(parley.EINVALIDVALUE, "messageId %q is not 1-128 characters of A-Z a-z 0-9 . _ : - (not . or ..)", req.MessageID)
	case req.To != "" && !parley.ValidID(req.To):
		return parley.Errorf(parley.EINVALIDVALUE, "to %q is not a valid agent id", req.To)
	}
	return nil
}

// ensureConversation makes sure conversation id exists and act may write
// it. A conversation that does not exist is made, as by POST
// /v1/conversations (it counts toward the caller's creation rate): its
// owner is the caller's agent, the agent asked (to) its participant, and
// the asker a member.
func (s *Server) ensureConversation(ctx context.Context, who parley.Identity, act conv.Actor, id, to string) error {
	writable := func(st conv.State) error { return st.CanWrite(act) }
	err := s.eng.Require(ctx, id, writable)
	if parley.ErrorCode(err) != parley.ENOTFOUND {
		return err
	}
	if err := s.creates.allow(who); err != nil {
		return err
	}
	c := parley.Conversation{ID: id, CreatedBy: who.AgentID, Participants: []string{}}
	if c.CreatedBy == "" {
		c.CreatedBy = string(who.Kind)
	}
	if to != "" {
		c.Participants = []string{to}
	}
	if act.AgentID != to && act.AgentID != who.AgentID {
		c.Members = []string{act.AgentID} // an admin asking as an agent
	}
	_, err = s.eng.CreateConversation(ctx, c)
	if parley.ErrorCode(err) == parley.EBUSY {
		return s.eng.Require(ctx, id, writable) // made meanwhile by another request
	}
	return err
}

// revertExchange removes the exchange a regenerate or an edit replaces:
// from the message named (an answer: from the question it answers), else
// from the asker's latest question. Nothing to remove is no error.
func (s *Server) revertExchange(ctx context.Context, id string, act conv.Actor, messageID string) error {
	st := s.eng.Store()
	target := ""
	if messageID != "" {
		m, err := st.GetMessage(ctx, id, messageID)
		switch {
		case parley.ErrorCode(err) == parley.ENOTFOUND:
		case err != nil:
			return err
		case m.Role == parley.RoleUser:
			target = m.ID
		default:
			target = m.ID
			if q, err := st.GetMessage(ctx, id, m.ReplyTo); m.ReplyTo != "" && err == nil && q.Role == parley.RoleUser {
				target = q.ID
			}
		}
	}
	// Else the asker's latest question, among its last 20 messages, each
	// read by itself and only its head looked at: their text may be large.
	for n, before := 0, int64(0); target == "" && n < 20; n++ {
		rows, err := st.ListMessagesRaw(ctx, store.ListMessagesParams{ConversationID: id, AgentID: act.AgentID, Latest: true, Limit: 1, Before: before})
		if err != nil || len(rows) == 0 {
			return err
		}
		m, _, err := store.ReadRowHead(rows[0].Data)
		if err != nil {
			return err
		}
		if m.Role == parley.RoleUser {
			target = m.ID
		}
		before = rows[0].Seq
	}
	if target == "" {
		return nil
	}
	_, err := s.runners.Revert(ctx, id, act, target)
	return err
}

// ask queues text as a prompt to agent to (any runner when empty) with id
// promptID, and returns its answer to follow and the position to follow it
// from. With same, a prompt or message of the asker's that has that id
// already is the same question asked again (a retried request): its answer
// is followed from its start and nothing is queued. Otherwise an id that
// is taken (by another's prompt or message, or by one removed since: ids
// are never reused) gets a new one.
func (s *Server) ask(ctx context.Context, convID string, act conv.Actor, promptID, text, to string, same bool) (*answerState, parley.Position, error) {
	if from, ok, err := s.askedBefore(ctx, convID, promptID, act.AgentID); err != nil || ok {
		if err == nil && !same {
			return s.ask(ctx, convID, act, engine.NewID(), text, to, false)
		}
		return newAnswer(promptID), from, err
	}
	res, err := s.eng.EnqueuePrompt(ctx, convID, conv.EnqueuePrompt{Actor: act, ID: promptID, Content: text, To: to})
	if parley.ErrorCode(err) == parley.EBUSY {
		// Queued meanwhile by the same request sent twice?
		if from, ok, qerr := s.askedBefore(ctx, convID, promptID, act.AgentID); qerr == nil && ok && same {
			return newAnswer(promptID), from, nil
		}
		if takenID(err) == promptID {
			return s.ask(ctx, convID, act, engine.NewID(), text, to, false)
		}
	}
	if err != nil {
		return nil, parley.Position{}, err
	}
	return newAnswer(promptID), parley.Position{Seq: res.Seq}, nil
}

// takenID is the id a refusal says is taken already, or "".
func takenID(err error) string {
	var e *parley.Error
	if errors.As(err, &e) {
		id, _ := e.Details["id"].(string)
		return id
	}
	return ""
}

// askedBefore finds prompt id, asked by asker, in the conversation: in the
// queue, or as its message. It returns the position its answer is to be
// followed from: after its prompt.queued event, or just before its
// message. A prompt or message of that id by another is not found: it is
// not the asker's question.
func (s *Server) askedBefore(ctx context.Context, convID, id, asker string) (parley.Position, bool, error) {
	var from parley.Position
	found, queued := false, false
	err := s.eng.Require(ctx, convID, func(st conv.State) error {
		for _, p := range st.Queue {
			if p.ID == id && len(p.Parts) > 0 {
				queued = true
				from, found = parley.Position{Seq: p.Parts[0], Epoch: st.Conversation.Epoch}, p.AgentID == asker
			}
		}
		return nil
	})
	if err != nil || queued {
		return from, found, err
	}
	m, err := s.eng.Store().MessageKey(ctx, convID, id) // its seq: not its row
	switch {
	case parley.ErrorCode(err) == parley.ENOTFOUND:
		return from, false, nil
	case err != nil:
		return from, false, err
	}
	return parley.Position{Seq: m.Seq - 1}, m.AgentID == asker, nil
}

// resumeChat serves GET /v1/chat/{id}/stream, what the AI SDK's
// reconnectToStream asks: 204 when no answer is under way, otherwise the
// answer under way from its start, then live. A chat not made yet has
// none: useChat with resume asks as a new chat's page loads, before its
// first question makes the conversation. (Whether a conversation exists is
// no secret: one the caller may not read is 403.)
func (s *Server) resumeChat(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	id := r.PathValue("id")
	err := s.readable(r, who)
	var (
		a    *answerState
		from parley.Position
	)
	if err == nil {
		a, from, err = s.answerUnderWay(r.Context(), id)
	}
	if parley.ErrorCode(err) == parley.ENOTFOUND && parley.ValidID(id) {
		err, a = nil, nil
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	if a == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ctx, cut := context.WithCancelCause(r.Context())
	defer cut(nil)
	release, ok := s.connectReader(w, r, who, cut) // the right to read again, now held
	if !ok {
		return
	}
	defer release()
	s.streamChat(ctx, w, id, a, from)
}

// answerUnderWay finds the answer a chat's client should see streaming:
// the answer to the prompt being answered, else to the first prompt
// waiting, else the latest message still streaming. It returns nil when
// there is none.
func (s *Server) answerUnderWay(ctx context.Context, id string) (*answerState, parley.Position, error) {
	var (
		prompt  *conv.QueuedPrompt
		streams []string
		epoch   string
	)
	err := s.eng.Require(ctx, id, func(st conv.State) error {
		epoch = st.Conversation.Epoch
		if prompt = st.Active(); prompt == nil && len(st.Queue) > 0 {
			prompt = &st.Queue[0]
		}
		for mid := range st.Streams.All() {
			streams = append(streams, mid)
		}
		return nil
	})
	if err != nil {
		return nil, parley.Position{}, err
	}
	if prompt != nil && len(prompt.Parts) > 0 {
		return newAnswer(prompt.ID), parley.Position{Seq: prompt.Parts[0], Epoch: epoch}, nil
	}
	var latest *parley.Message
	for _, mid := range streams {
		m, err := s.eng.Store().GetMessage(ctx, id, mid)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			continue
		}
		if err != nil {
			return nil, parley.Position{}, err
		}
		if m.Role != parley.RoleUser && (latest == nil || m.Seq > latest.Seq) {
			latest = m
		}
	}
	if latest == nil {
		return nil, parley.Position{}, nil
	}
	return answerOfMessage(latest.ID), parley.Position{Seq: latest.Seq - 1, Epoch: epoch}, nil
}

// streamChat answers with the UI message stream of answer a, followed from
// position from.
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, id string, a *answerState, from parley.Position) {
	out := s.startSSE(w, "X-Vercel-Ai-Ui-Message-Stream", "v1")
	defer out.done()
	end := s.followAnswer(ctx, id, from, a, out, func(steps []step, _ int64) error {
		for i := range steps {
			chunk := uiChunk(&steps[i])
			if chunk == nil {
				continue
			}
			if err := out.data("", chunk); err != nil {
				return err
			}
		}
		if a.ended() {
			return out.data("", []byte("[DONE]"))
		}
		return nil
	})
	if text, ok := s.endText(id, end); ok {
		msg, _ := json.Marshal(map[string]string{"type": "error", "errorText": text})
		if out.data("", msg) == nil && out.data("", []byte("[DONE]")) == nil {
			_ = out.flush()
		}
	}
}

// endText says why the server ended a chat stream (the token was revoked,
// the conversation deleted, the server is shutting down), for the client;
// ok is false when it did not (the answer ended, or the client left). An
// internal error is logged and told as "internal error".
func (s *Server) endText(id string, end error) (text string, ok bool) {
	frame := s.endFrame(id, end)
	if end == nil || frame == nil {
		return "", false
	}
	var f errorFrame
	_ = json.Unmarshal(frame, &f)
	text, _ = f.Error["message"].(string)
	return text, true
}

// uiChunk is a step as a UI message stream chunk, or nil for a step that
// has none. It carries only fields that `ai` 5.0.0, whose chunk schema
// refuses any other, lists.
//
// A retry's start has none: the answer's attempts are one UI message, under
// the first attempt's id. A second start naming the retry would rename the
// message, and useChat would then show it as a second answer, beside the
// first attempt's parts.
func uiChunk(st *step) []byte {
	var c map[string]any
	switch st.kind {
	case stepStart:
		if st.retry {
			return nil
		}
		c = map[string]any{"type": "start"}
		if st.id != "" {
			c["messageId"] = st.id
		}
	case stepStatus:
		c = map[string]any{"type": "data-parley-status", "data": json.RawMessage(st.text), "transient": true}
	case stepTextStart:
		c = map[string]any{"type": "text-start", "id": st.id}
	case stepTextDelta:
		c = map[string]any{"type": "text-delta", "id": st.id, "delta": st.text}
	case stepTextEnd:
		c = map[string]any{"type": "text-end", "id": st.id}
	case stepToolStart:
		c = map[string]any{"type": "tool-input-start", "toolCallId": st.id, "toolName": st.part.ToolName, "providerExecuted": true}
	case stepToolInput:
		var input any = json.RawMessage(`{}`)
		if st.part.Args != nil {
			input = st.part.Args
		}
		c = map[string]any{"type": "tool-input-available", "toolCallId": st.id, "toolName": st.part.ToolName, "input": input, "providerExecuted": true}
	case stepToolOutput:
		var output any = json.RawMessage(`null`)
		if st.part.Result != nil {
			output = st.part.Result
		}
		c = map[string]any{"type": "tool-output-available", "toolCallId": st.id, "output": output, "providerExecuted": true}
	case stepToolError:
		text := st.part.Error
		if text == "" {
			text = "the tool call failed"
		}
		c = map[string]any{"type": "tool-output-error", "toolCallId": st.id, "errorText": text, "providerExecuted": true}
	case stepFinish:
		switch st.end {
		case endCanceled:
			c = map[string]any{"type": "abort"}
		case endError:
			c = map[string]any{"type": "error", "errorText": st.text}
		default:
			c = map[string]any{"type": "finish"}
		}
	}
	b, _ := json.Marshal(c)
	return b
}
