package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// asking is a conversation whose runner answers a prompt in message m1,
// and a stream of its events from the start.
type asking struct {
	c   *client.Client
	ctx context.Context
	id  string
	r   *client.Runner
	st  *client.Stream
}

func newAsking(t *testing.T) *asking {
	t.Helper()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	a := &asking{c: c, ctx: ctx, id: v.Conversation.ID}
	a.st = c.Subscribe(ctx, a.id, client.SubscribeOptions{From: &parley.Position{Seq: 0, Epoch: v.Conversation.Epoch}})
	t.Cleanup(a.st.Close)
	if a.r, err = c.ConnectRunner(ctx, a.id, "bot"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.r.Close() })
	if _, err := c.Ask(ctx, a.id, "human", "Clean the build?", ""); err != nil {
		t.Fatal(err)
	}
	if p, err := a.r.Next(ctx); err != nil || p.Type != "prompt" {
		t.Fatalf("runner got %+v, %v; want the prompt", p, err)
	}
	if _, err := a.r.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	return a
}

// opened reads the stream until n input requests have opened.
func (a *asking) opened(t *testing.T, n int) {
	t.Helper()
	for n > 0 {
		fr, err := a.st.Next(a.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fr.Event != nil && fr.Event.Type == parley.EventPartUpdated && strings.Contains(string(fr.Event.Data), `"pending"`) &&
			strings.Contains(string(fr.Event.Data), `"input-request"`) {
			n--
		}
	}
}

func (a *asking) answer(t *testing.T, requestID string, answer any) {
	t.Helper()
	if _, err := a.c.AnswerInput(a.ctx, a.id, requestID, "human", answer); err != nil {
		t.Fatal(err)
	}
}

type approvalResult struct {
	a   parley.Approval
	err error
}

func (a *asking) ask(ctx context.Context, requestID string) chan approvalResult {
	out := make(chan approvalResult, 1)
	go func() {
		ap, err := a.r.AskApproval(ctx, "m1", parley.InputRequest{RequestID: requestID, ToolCallID: "call_" + requestID, ToolName: "bash",
			Title: "Run `rm -rf build`?"})
		out <- approvalResult{ap, err}
	}()
	return out
}

// TestAskApprovalAnswered: the approval a runner asks is answered over
// HTTP, and the call returns it; the message holds the answered request
// and awaits nothing more, and the outcome was acked.
func TestAskApprovalAnswered(t *testing.T) {
	t.Parallel()
	a := newAsking(t)
	got := a.ask(a.ctx, "req_1")
	a.opened(t, 1)
	pending, err := a.c.Inputs(a.ctx, a.id, "pending")
	if err != nil || len(pending) != 1 || pending[0].RequestID != "req_1" || pending[0].Kind != "approval" || pending[0].MessageID != "m1" {
		t.Fatalf("Inputs returned %+v, %v; want req_1 pending", pending, err)
	}
	a.answer(t, "req_1", parley.Approval{Approved: true, Reason: "go ahead"})
	if r := <-got; r.err != nil || r.a != (parley.Approval{Approved: true, Reason: "go ahead"}) {
		t.Fatalf("AskApproval returned %+v, %v", r.a, r.err)
	}
	m, err := a.r.State(a.ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if m.AwaitingInput {
		t.Errorf("m1 still awaits input")
	}
	// Acked before the call returned: not even open (an outcome the runner
	// has not taken) any more.
	if open, err := a.c.Inputs(a.ctx, a.id, "open"); err != nil || len(open) != 0 {
		t.Errorf("Inputs returned %+v, %v; want none open", open, err)
	}
}

// TestAskApprovalTwoAtOnce: two requests open at once, answered in the
// other order, each call gets its own answer.
func TestAskApprovalTwoAtOnce(t *testing.T) {
	t.Parallel()
	for _, order := range [][2]string{{"req_a", "req_b"}, {"req_b", "req_a"}} {
		a := newAsking(t)
		got := map[string]chan approvalResult{"req_a": a.ask(a.ctx, "req_a"), "req_b": a.ask(a.ctx, "req_b")}
		a.opened(t, 2)
		for _, id := range order {
			a.answer(t, id, parley.Approval{Approved: id == "req_a", Reason: id})
			if r := <-got[id]; r.err != nil || r.a != (parley.Approval{Approved: id == "req_a", Reason: id}) {
				t.Fatalf("%v: AskApproval of %s returned %+v, %v", order, id, r.a, r.err)
			}
		}
	}
}

// TestAskApprovalCanceled: a call whose ctx ends returns its error and
// leaves the request pending; its answer then comes to Next, once acked
// no more.
func TestAskApprovalCanceled(t *testing.T) {
	t.Parallel()
	a := newAsking(t)
	ctx, cancel := context.WithCancel(a.ctx)
	got := a.ask(ctx, "req_1")
	a.opened(t, 1)
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("AskApproval returned %+v, %v; want context.Canceled", r.a, r.err)
	}
	a.answer(t, "req_1", parley.Approval{Approved: true})
	p, err := a.r.Next(a.ctx)
	if err != nil || p.Type != "input.answered" || p.Answered == nil || p.Answered.RequestID != "req_1" || p.MessageID != "m1" {
		t.Fatalf("Next returned %+v, %v; want req_1's outcome", p, err)
	}
	if open, err := a.c.Inputs(a.ctx, a.id, "open"); err != nil || len(open) != 1 || open[0].Status != parley.InputStatusAnswered {
		t.Fatalf("Inputs returned %+v, %v; want req_1 answered and not taken", open, err)
	}
	if err := a.r.AckInput(a.ctx, "req_1"); err != nil {
		t.Fatal(err)
	}
	if open, err := a.c.Inputs(a.ctx, a.id, "open"); err != nil || len(open) != 0 {
		t.Fatalf("Inputs returned %+v, %v; want none open once acked", open, err)
	}
}

// TestAskApprovalAcrossAReconnect: the runner reconnects while it waits;
// the answer given then reaches the call once, and is not sent again
// after it was acked (the next thing the runner hears of is the next
// prompt).
func TestAskApprovalAcrossAReconnect(t *testing.T) {
	t.Parallel()
	a := newAsking(t)
	got := a.ask(a.ctx, "req_1")
	a.opened(t, 1)
	if err := a.r.Reconnect(a.ctx); err != nil {
		t.Fatal(err)
	}
	a.answer(t, "req_1", parley.Approval{Approved: true})
	if r := <-got; r.err != nil || !r.a.Approved {
		t.Fatalf("AskApproval returned %+v, %v", r.a, r.err)
	}
	if _, err := a.r.Finalize(a.ctx, "m1", parley.FinishEndTurn, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.r.Complete(a.ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.r.Reconnect(a.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Ask(a.ctx, a.id, "human", "And now?", ""); err != nil {
		t.Fatal(err)
	}
	if p, err := a.r.Next(a.ctx); err != nil || p.Type != "prompt" {
		t.Fatalf("Next returned %+v, %v; want the next prompt and no outcome again", p, err)
	}
}

// TestReplyAsksInServe: a Serve handler asks through its Reply, in the
// answer's message, and goes on as answered; an abort while it waits
// cancels the request and ends the answer canceled.
func TestReplyAsksInServe(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0, Epoch: v.Conversation.Epoch}})
	t.Cleanup(st.Close)
	r, err := c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	go r.Serve(ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		if err := rp.Text(ctx, "Checking. "); err != nil {
			return err
		}
		a, err := rp.AskApproval(ctx, parley.InputRequest{Title: "Go on?"})
		if err != nil {
			return err
		}
		return rp.Text(ctx, fmt.Sprintf("approved=%v", a.Approved))
	}))
	a := &asking{c: c, ctx: ctx, id: id, r: r, st: st}
	if _, err := c.Ask(ctx, id, "human", "first", ""); err != nil {
		t.Fatal(err)
	}
	a.opened(t, 1)
	pending, err := c.Inputs(ctx, id, "")
	if err != nil || len(pending) != 1 {
		t.Fatalf("Inputs returned %+v, %v; want one pending", pending, err)
	}
	a.answer(t, pending[0].RequestID, parley.Approval{Approved: true})
	untilPrompts(t, ctx, st, 1)
	if _, err := c.Ask(ctx, id, "human", "second", ""); err != nil {
		t.Fatal(err)
	}
	a.opened(t, 1)
	if err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ends := untilPrompts(t, ctx, st, 1); ends[0] != "prompt.canceled" {
		t.Fatalf("the second prompt ended %v, want canceled", ends)
	}
	msgs, err := c.AllMessages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		if m.AgentID == "bot" {
			got = append(got, string(m.Status)+" "+m.Content)
		}
	}
	if strings.Join(got, " | ") != "complete Checking. approved=true | canceled Checking. " {
		t.Fatalf("the answers are %q", got)
	}
	// Nothing is left open: the canceled request's outcome was acked (by
	// the call, or by Serve) or its message ended.
	if open, err := c.Inputs(ctx, id, "open"); err != nil || len(open) != 0 {
		t.Fatalf("Inputs returned %+v, %v; want none open", open, err)
	}
}
