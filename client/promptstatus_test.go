package client_test

import (
	"context"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestAskAndWaitReturnsTheAnswer: AskAndWait queues a prompt and returns
// the runner's answer once the prompt ends; Prompt says where a prompt
// stands, and a withdrawn one ends canceled with no answer.
func TestAskAndWaitReturnsTheAnswer(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	s := serveConversation(t, c, nil, ctx, client.HandlerFunc(echo))
	a, err := c.AskAndWait(ctx, s.id, client.NewPrompt{ID: "p1", AgentID: "human", Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Status.State != client.PromptStateCompleted || a.Status.Runner != "bot" || a.Message == nil ||
		a.Message.ReplyTo != "p1" || a.Message.Status != parley.StatusComplete || a.Message.Content == "" {
		t.Fatalf("AskAndWait = %+v, message %+v", a.Status, a.Message)
	}
	st, err := c.Prompt(ctx, s.id, "p1")
	if err != nil || st.State != client.PromptStateCompleted || st.MessageID != a.Message.ID {
		t.Fatalf("Prompt(p1) = %+v, %v", st, err)
	}
	if _, err := c.Prompt(ctx, s.id, "nope"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("Prompt of an unknown prompt: %v", err)
	}

	// With no runner, a prompt says it waits for one; taken back, it ends
	// canceled and AskAndWait's wait returns with no answer.
	if err := s.stop(); err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Ask(ctx, v.Conversation.ID, "human", "anyone?", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Prompt(ctx, v.Conversation.ID, id)
	if err != nil || st.State != client.PromptStateQueued || st.WaitingOn == nil || st.WaitingOn.Reason != "runner" {
		t.Fatalf("Prompt with no runner = %+v, %v", st, err)
	}
	if _, err := c.WithdrawPrompt(ctx, v.Conversation.ID, id, "human"); err != nil {
		t.Fatal(err)
	}
	st, err = c.WaitPrompt(ctx, v.Conversation.ID, id)
	if err != nil || st.State != client.PromptStateCanceled || st.Reason != "withdrawn" || st.MessageID != "" {
		t.Fatalf("WaitPrompt of a withdrawn prompt = %+v, %v", st, err)
	}
}
