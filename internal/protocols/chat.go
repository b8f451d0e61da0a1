package protocols

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// The Vercel AI SDK's chat (useChat with DefaultChatTransport): POST
// /v1/chat asks, GET /v1/chat/{id}/stream resumes. Both answer with the UI
// message stream protocol: SSE "data: <chunk>" lines ending with
// "data: [DONE]". Only fields that every supported version of the `ai`
// package lists are sent (5.0's first releases refuse any other), and the
// answer is built from the conversation's log (answer.go), so a resumed
// stream holds exactly what the first held.

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

// uiMessage is a UI message as far as a prompt, or an approval's answer,
// needs it. Its other fields (metadata, most of a part's) are the client's
// and are not read.
type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		// A tool part's state, and its approval once answered
		// (addToolApprovalResponse): state approval-responded.
		State      string      `json:"state"`
		ToolCallID string      `json:"toolCallId"`
		Approval   *uiApproval `json:"approval"`
	} `json:"parts"`
}

// lastMessage is the last of a chat's UI messages (see lastOf).
type lastMessage struct{ lastOf[uiMessage] }

// about names UI messages in the errors of lastOf.
func (uiMessage) about() (plural, one string) { return "UI messages", "a UI message {id, role, parts}" }

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

// Chat serves POST /v1/chat: it asks the chat's conversation (made on first use) the last user
// message, as the caller, and streams the answer.
func (s *Server) Chat(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	if !who.CanWrite() {
		s.host.Refuse(w, r, parley.Errorf(parley.EFORBIDDEN, "a %s token cannot ask", who.Kind))
		return
	}
	// The answer is a stream, a connection of the token: its bound is
	// checked before the body (up to 16 MiB) is read.
	ctx, done, ok := s.host.ConnectStream(w, r, who)
	if !ok {
		return
	}
	defer done()
	var req chatRequest
	if err := s.readBody(w, r, &req); err != nil {
		s.host.WriteError(w, err)
		return
	}
	act, err := s.host.Actor(who, req.AgentID)
	if err == nil {
		err = checkChat(&req)
	}
	if last := req.Messages.last; err == nil && last != nil && last.Role == string(parley.RoleAssistant) {
		// The answer's message, with approvals answered: the answer goes on.
		s.chatApproved(ctx, w, r, act, &req)
		return
	}
	var userID, text string
	if err == nil {
		userID, text, err = req.Messages.promptText()
	}
	if err == nil {
		err = s.checkPromptSize(text)
	}
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	if err := s.ensureConversation(r.Context(), who, act, req.ID, req.To); err != nil {
		s.host.WriteError(w, err)
		return
	}
	again := req.Trigger == triggerRegenerate || req.MessageID != ""
	if again {
		if err := s.revertExchange(r.Context(), req.ID, act, req.MessageID); err != nil {
			s.host.WriteError(w, err)
			return
		}
	}
	a, from, err := s.ask(r.Context(), req.ID, act, userID, text, req.To, !again)
	if err != nil {
		s.host.WriteError(w, err)
		return
	}
	s.streamChat(ctx, w, req.ID, a, from, nil)
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
	if err := s.host.AllowCreate(who); err != nil {
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

// revertExchange removes the exchange a regenerate or an edit replaces
// (reads.Reader.ExchangeStart says from where). Nothing to remove is no
// error.
func (s *Server) revertExchange(ctx context.Context, id string, act conv.Actor, messageID string) error {
	target, err := s.rd.ExchangeStart(ctx, id, act.AgentID, messageID)
	if err != nil || target == "" {
		return err
	}
	_, err = s.runners.Revert(ctx, id, act, target)
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
	if from, ok, err := s.rd.AskedBefore(ctx, convID, promptID, act.AgentID); err != nil || ok {
		if err == nil && !same {
			return s.ask(ctx, convID, act, engine.NewID(), text, to, false)
		}
		return newAnswer(promptID), from, err
	}
	res, err := s.eng.EnqueuePrompt(ctx, convID, conv.EnqueuePrompt{Actor: act, ID: promptID, Content: text, To: to})
	if parley.ErrorCode(err) == parley.EBUSY {
		// Queued meanwhile by the same request sent twice?
		if from, ok, qerr := s.rd.AskedBefore(ctx, convID, promptID, act.AgentID); qerr == nil && ok && same {
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

// ResumeChat serves GET /v1/chat/{id}/stream, what the AI SDK's
// reconnectToStream asks: 204 when no answer is under way, otherwise the
// answer under way from its start, then live. A chat not made yet has
// none: useChat with resume asks as a new chat's page loads, before its
// first question makes the conversation. (Whether a conversation exists is
// no secret: one the caller may not read is 403.)
func (s *Server) ResumeChat(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	id := r.PathValue("id")
	err := s.host.Readable(r, who)
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
		s.host.WriteError(w, err)
		return
	}
	if a == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ctx, cut := context.WithCancelCause(r.Context())
	defer cut(nil)
	release, ok := s.host.ConnectReader(w, r, who, cut) // the right to read again, now held
	if !ok {
		return
	}
	defer release()
	s.streamChat(ctx, w, id, a, from, nil)
}

// answerUnderWay finds the answer a chat's client should see streaming
// (reads.Reader.AnswerUnderWay), and the position to follow it from. It
// returns nil when there is none.
func (s *Server) answerUnderWay(ctx context.Context, id string) (*answerState, parley.Position, error) {
	u, err := s.rd.AnswerUnderWay(ctx, id)
	switch {
	case err != nil || u == nil:
		return nil, parley.Position{}, err
	case u.PromptID != "":
		return newAnswer(u.PromptID), u.From, nil
	}
	return answerOfMessage(u.MessageID), u.From, nil
}

// streamChat answers with the UI message stream of answer a, followed from
// position from. With skip, the stream goes on from where an earlier one
// paused (chat_input.go): the steps until then are not sent again. A
// stream pauses at an approval still pending (it ends with finish, and the
// answer goes on in the request that answers it).
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, id string, a *answerState, from parley.Position, skip *skipper) {
	out := s.startSSE(w, "X-Vercel-Ai-Ui-Message-Stream", "v1")
	defer out.done()
	end := s.followAnswer(ctx, id, from, a, out, func(steps []step, _ int64) error {
		for i := range steps {
			if !skip.pass(&steps[i]) {
				continue
			}
			for _, chunk := range uiChunks(&steps[i]) {
				if err := out.data("", chunk); err != nil {
					return err
				}
			}
		}
		skip.next()
		if a.ended() {
			return out.data("", []byte("[DONE]"))
		}
		if skip.active() {
			return nil
		}
		return s.chatPause(ctx, id, a, out)
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
	frame := s.streams.EndFrame(id, end)
	if end == nil || frame == nil {
		return "", false
	}
	var f struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(frame, &f)
	return f.Error.Message, true
}

// uiChunks are a step as UI message stream chunks (none for a step that
// has none). It carries only fields that `ai` 5.0.0, whose chunk schema
// refuses any other, lists.
//
// A retry's start has none: the answer's attempts are one UI message, under
// the first attempt's id. A second start naming the retry would rename the
// message, and useChat would then show it as a second answer, beside the
// first attempt's parts.
func uiChunks(st *step) [][]byte {
	var c map[string]any
	switch st.kind {
	case stepInput, stepInputEnd, stepToolDenied:
		return inputChunks(st)
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
	if c == nil {
		return nil
	}
	b, _ := json.Marshal(c)
	return [][]byte{b}
}
