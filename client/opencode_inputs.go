package client

// OpenCode's permission and question requests, relayed as Parley input
// requests: what the session asks while it answers becomes a request in
// the answer's message, and the outcome goes back to OpenCode's reply
// endpoint.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/parleyhq/parley"
)

// OpenCodePermission is what OpenCode asks leave for (permission.asked,
// or permission.updated in versions before 1.0): to run a tool on some
// patterns (a command, a file).
type OpenCodePermission struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	// Permission is the kind of permission (bash, edit, webfetch, …);
	// Type in versions before 1.0.
	Permission string   `json:"permission,omitempty"`
	Type       string   `json:"type,omitempty"`
	Patterns   []string `json:"patterns,omitempty"`
	Pattern    any      `json:"pattern,omitempty"` // before 1.0: a string or a list
	Always     []string `json:"always,omitempty"`
	// Metadata is the tool's input as far as the permission goes (such as
	// {"command": "…"}).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Title    string          `json:"title,omitempty"`
	Tool     *struct {
		MessageID string `json:"messageID"`
		CallID    string `json:"callID"`
	} `json:"tool,omitempty"`
	CallID    string `json:"callID,omitempty"` // before 1.0
	MessageID string `json:"messageID,omitempty"`
}

// OpenCodeQuestion is one question of OpenCode's question tool
// (question.asked holds a list of them).
type OpenCodeQuestion struct {
	Question string `json:"question"`
	Header   string `json:"header,omitempty"`
	Options  []struct {
		Label       string `json:"label"`
		Description string `json:"description,omitempty"`
	} `json:"options,omitempty"`
	Multiple bool `json:"multiple,omitempty"`
}

// openCodeAsk is a permission.asked, permission.updated or question.asked
// event's properties.
type openCodeAsk struct {
	OpenCodePermission
	Questions []OpenCodeQuestion `json:"questions,omitempty"`
}

// asks are the event types that ask for input.
var asks = map[string]bool{"permission.asked": true, "permission.updated": true, "question.asked": true}

// replies are the event types that say what was asked is answered: by the
// bridge's reply, or in OpenCode's own UI.
var replies = map[string]bool{"permission.replied": true, "question.replied": true, "question.rejected": true}

// withdraw takes back in Parley the request asked for what OpenCode says
// is answered, if it is still pending there: it was answered in
// OpenCode's own UI. One the bridge answered itself has ended, and is left
// as it is.
func (oc *openCode) withdraw(ctx context.Context, r *Runner, openCodeID string) {
	if id, ok := oc.asking.Load(openCodeID); ok {
		_ = r.WithdrawInput(ctx, id.(string), "answered in OpenCode")
	}
}

// decodeOpenCodeAsk decodes an event that asks for input.
func decodeOpenCodeAsk(data []byte) (typ string, ask openCodeAsk, err error) {
	var ev struct {
		Type       string      `json:"type"`
		Properties openCodeAsk `json:"properties"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", ask, fmt.Errorf("OpenCode event: %w", err)
	}
	return ev.Type, ev.Properties, nil
}

// callID is the tool call a permission is about.
func (p *OpenCodePermission) callID() string {
	if p.Tool != nil {
		return p.Tool.CallID
	}
	return p.CallID
}

// patterns are what the permission is for.
func (p *OpenCodePermission) patterns() []string {
	if len(p.Patterns) > 0 {
		return p.Patterns
	}
	switch v := p.Pattern.(type) {
	case string:
		return []string{v}
	case []any:
		var s []string
		for _, x := range v {
			if str, ok := x.(string); ok {
				s = append(s, str)
			}
		}
		return s
	}
	return nil
}

// approvalRequest is the Parley request of a permission.
func (p *OpenCodePermission) approvalRequest() parley.InputRequest {
	kind := p.Permission
	if kind == "" {
		kind = p.Type
	}
	pats := p.patterns()
	title := p.Title
	if title == "" {
		title = "Allow " + kind
		if len(pats) > 0 {
			title += ": " + strings.Join(pats, ", ")
		}
		title += "?"
	}
	req := parley.InputRequest{RequestID: p.ID, ToolCallID: p.callID(), ToolName: kind, Title: title}
	if isValue(p.Metadata) && string(p.Metadata) != "{}" {
		req.Args = p.Metadata
	}
	if len(p.Always) > 0 {
		req.Detail = "OpenCode asks leave for " + kind + " on `" + strings.Join(pats, "`, `") + "`."
	}
	return req
}

// relayInput asks Parley what OpenCode asked in the answer under way (the
// answer's message is created first) and sends the outcome back to
// OpenCode. It waits for the outcome in a goroutine of its own, so that
// the session's events go on being relayed: a stop cancels the request,
// and the permission is then refused (the question rejected). A request
// Parley refuses is refused to OpenCode too. The outcome of the reply to
// OpenCode is not waited for: one answered in OpenCode's own UI meanwhile
// is answered there, and withdrawn in Parley (withdraw).
func (oc *openCode) relayInput(ctx context.Context, a *OpenCodeAdapter, typ string, ask openCodeAsk) error {
	if err := a.create(ctx); err != nil {
		return err
	}
	r, turnID := a.Runner, a.turnID
	switch typ {
	case "question.asked":
		go oc.ask(ctx, r, turnID, ask)
	default:
		go oc.permit(ctx, r, turnID, typ, ask.OpenCodePermission)
	}
	return nil
}

// permit asks for an approval and replies to OpenCode's permission.
func (oc *openCode) permit(ctx context.Context, r *Runner, turnID, typ string, p OpenCodePermission) {
	req := p.approvalRequest()
	oc.asking.Store(p.ID, req.RequestID)
	defer oc.asking.Delete(p.ID)
	a, err := r.AskApproval(ctx, turnID, req)
	if ctx.Err() != nil {
		return
	}
	reply := "reject"
	if err == nil && a.Approved {
		reply = "once"
	}
	if typ == "permission.updated" { // before 1.0
		_ = oc.post(ctx, "/session/"+url.PathEscape(p.SessionID)+"/permissions/"+url.PathEscape(p.ID), map[string]string{"response": reply}, nil)
		return
	}
	body := map[string]string{"reply": reply}
	if reply == "reject" && a.Reason != "" {
		body["message"] = a.Reason
	}
	_ = oc.post(ctx, "/permission/"+url.PathEscape(p.ID)+"/reply", body, nil)
}

// ask asks each question of a question tool call in turn, and replies
// with all the answers (each a list of labels, or the text written), or
// rejects the call if one is not answered.
func (oc *openCode) ask(ctx context.Context, r *Runner, turnID string, q openCodeAsk) {
	answers := make([][]string, 0, len(q.Questions))
	defer oc.asking.Delete(q.ID)
	for i, question := range q.Questions {
		req := parley.InputRequest{RequestID: q.ID, ToolCallID: q.callID(), ToolName: "question", Title: question.Question,
			Detail: question.Header, Multiple: question.Multiple}
		if len(q.Questions) > 1 {
			req.RequestID = fmt.Sprintf("%s_%d", q.ID, i+1)
		}
		for _, o := range question.Options {
			req.Options = append(req.Options, parley.InputOption{Label: o.Label, Description: o.Description})
		}
		oc.asking.Store(q.ID, req.RequestID)
		raw, err := r.AskQuestion(ctx, turnID, req)
		if ctx.Err() != nil {
			return
		}
		answer, ok := openCodeAnswer(raw)
		if err != nil || !ok {
			_ = oc.post(ctx, "/question/"+url.PathEscape(q.ID)+"/reject", nil, nil)
			return
		}
		answers = append(answers, answer)
	}
	_ = oc.post(ctx, "/question/"+url.PathEscape(q.ID)+"/reply", map[string]any{"answers": answers}, nil)
}

// openCodeAnswer is the answer OpenCode takes for a Parley one: the labels
// chosen, or the text written as the one label.
func openCodeAnswer(raw json.RawMessage) ([]string, bool) {
	var a struct {
		Choices []string `json:"choices"`
		Text    *string  `json:"text"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	switch {
	case len(a.Choices) > 0:
		return a.Choices, true
	case a.Text != nil:
		return []string{*a.Text}, true
	}
	return nil, false
}
