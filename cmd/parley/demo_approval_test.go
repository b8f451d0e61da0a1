package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// frameAsker asks for approval with the runner protocol's frames over a
// connection of its own of the supervisor (the demo's runner cannot send
// them itself until the Go SDK's can), and learns the outcome from the
// conversation's list of open requests.
type frameAsker struct {
	base, conv string
}

func (a frameAsker) AskApproval(ctx context.Context, messageID string, req parley.InputRequest) (parley.Approval, error) {
	ws, _, err := websocket.Dial(ctx, strings.Replace(a.base, "http", "ws", 1)+"/v1/conversations/"+url.PathEscape(a.conv)+"/runner?agentId="+demoSupervisor, nil)
	if err != nil {
		return parley.Approval{}, err
	}
	defer ws.CloseNow()
	send := func(frame any) error {
		b, _ := json.Marshal(frame)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			return err
		}
		for { // the ack; pushes of this connection (input.pending, say) are passed over
			_, b, err := ws.Read(ctx)
			if err != nil {
				return err
			}
			var r struct{ Type string }
			_ = json.Unmarshal(b, &r)
			switch r.Type {
			case "ack":
				return nil
			case "error":
				return fmt.Errorf("refused: %s", b)
			}
		}
	}
	frame := map[string]any{"type": "message.part.input-request", "turnId": messageID}
	b, _ := json.Marshal(req)
	_ = json.Unmarshal(b, &frame)
	frame["type"], frame["turnId"] = "message.part.input-request", messageID
	if err := send(frame); err != nil {
		return parley.Approval{}, err
	}
	for {
		var list parley.InputList
		resp, err := http.Get(a.base + "/v1/conversations/" + url.PathEscape(a.conv) + "/inputs?status=open")
		if err != nil {
			return parley.Approval{}, err
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			return parley.Approval{}, err
		}
		for _, in := range list.Inputs {
			if in.RequestID != req.RequestID || in.Status == parley.InputStatusPending {
				continue
			}
			if err := send(map[string]any{"type": "input.ack", "requestId": req.RequestID}); err != nil {
				return parley.Approval{}, err
			}
			var ap parley.Approval
			if in.Status == parley.InputStatusAnswered {
				_ = json.Unmarshal(in.Answer, &ap)
			} else {
				ap.Reason = in.Status
			}
			return ap, nil
		}
		select {
		case <-ctx.Done():
			return parley.Approval{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestDemoAsksForApproval: with every answer asking (-approve-every 1),
// the supervisor asks before its deploy tool call; nobody answers the
// first request, which expires, and the answer goes on as denied (the
// call ends in an error, the answer says it does not deploy); a person
// approves the second, and the call runs and completes.
func TestDemoAsksForApproval(t *testing.T) {
	t.Setenv("PARLEY_POSTGRES_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m := newServeMain(io.Discard)
	if err := m.ParseFlags([]string{"-db", filepath.Join(t.TempDir(), "demo.db"), "-addr", "127.0.0.1:0", "-log-level", "error"}); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	o := demoOptions{every: time.Hour, taskEvery: time.Hour, approveEvery: 1, approvalWait: time.Second}
	m.onReady = func(ctx context.Context, base string, log *slog.Logger) {
		ready <- base
		// The asker needs the conversation's id, which the demo makes:
		// it is read when the first answer asks.
		askerOf := func(*client.Runner) approvalAsker {
			page, err := client.New(base, "").ListConversations(ctx, client.ListConversationsOptions{})
			if err != nil || len(page.Conversations) == 0 {
				return nil
			}
			return frameAsker{base: base, conv: page.Conversations[0].Conversation.ID}
		}
		_ = demoWith(ctx, base, o, log, askerOf)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := <-ready
	c := client.New(base, "")

	// answers returns the supervisor's answers that have ended, oldest first.
	answers := func() []*parley.Message {
		page, err := c.ListConversations(ctx, client.ListConversationsOptions{})
		if err != nil || len(page.Conversations) == 0 {
			return nil
		}
		ms, _, err := c.Messages(ctx, page.Conversations[0].Conversation.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []*parley.Message
		for _, m := range ms {
			if m.AgentID == demoSupervisor && m.Status != parley.StatusStreaming {
				out = append(out, m)
			}
		}
		return out
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the first answer", func() bool { return len(answers()) >= 1 })
	first := answers()[0]
	checkDeploy(t, first, parley.ToolError, parley.InputStatusExpired, "Not deploying it (expired).")

	conv := first.ConversationID
	if _, err := c.Ask(ctx, conv, demoYou, "What is 17 times 23?", "followup"); err != nil {
		t.Fatal(err)
	}
	var requestID string
	waitFor("the second request", func() bool {
		list := inputs(t, base, conv)
		if len(list.Inputs) > 0 {
			requestID = list.Inputs[0].RequestID
		}
		return requestID != ""
	})
	body := `{"agentId":"you","answer":{"approved":true}}`
	resp, err := http.Post(base+"/v1/conversations/"+url.PathEscape(conv)+"/inputs/"+url.PathEscape(requestID), "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answering %s: %s", requestID, resp.Status)
	}
	waitFor("the second answer", func() bool { return len(answers()) >= 2 })
	checkDeploy(t, answers()[1], parley.ToolCompleted, parley.InputStatusAnswered, "Deployed.")
}

// inputs is the conversation's list of pending input requests.
func inputs(t *testing.T, base, conv string) parley.InputList {
	t.Helper()
	var list parley.InputList
	resp, err := http.Get(base + "/v1/conversations/" + url.PathEscape(conv) + "/inputs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list
}

// checkDeploy checks an answer of the demo that asked for approval: its
// deploy call ended with status call, its request with status req, and
// its text says what came of it.
func checkDeploy(t *testing.T, m *parley.Message, call, req, says string) {
	t.Helper()
	var gotCall, gotReq string
	for _, p := range m.Parts {
		switch {
		case p.Type == parley.PartToolCall && p.ToolName == "deploy":
			gotCall = p.Status
		case p.Type == parley.PartInputRequest:
			gotReq = p.Status
			if p.ToolName != "deploy" || p.Kind != parley.InputApproval || p.ToolCallID == "" {
				t.Errorf("the request: %+v", p)
			}
		}
	}
	if gotCall != call || gotReq != req || !strings.Contains(m.Content, says) || m.Status != parley.StatusComplete {
		t.Fatalf("answer %s (%s): deploy %q, request %q, text %q; want deploy %q, request %q, text with %q", m.ID, m.Status, gotCall, gotReq, m.Content, call, req, says)
	}
}

// TestDemoAsksThroughTheSDKsRunner: once the Go SDK's runner has an
// AskApproval, it is the demo's asker; one the demo's approvalAsker does
// not match (another signature) would leave the demo asking nobody.
func TestDemoAsksThroughTheSDKsRunner(t *testing.T) {
	r := &client.Runner{}
	if _, has := reflect.TypeOf(r).MethodByName("AskApproval"); has && runnerAsker(r) == nil {
		t.Fatalf("client.Runner.AskApproval is %v, which is not the demo's approvalAsker", reflect.ValueOf(r).MethodByName("AskApproval").Type())
	}
}
