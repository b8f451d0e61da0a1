package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// botConversation makes a conversation in which bot answers and human
// asks, and follows its log from seq 0.
func botConversation(t *testing.T, c *client.Client, ctx context.Context) *served {
	t.Helper()
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &served{t: t, c: c, ctx: ctx, id: v.Conversation.ID}
	s.st = c.Subscribe(ctx, s.id, client.SubscribeOptions{From: &parley.Position{Seq: 0}})
	t.Cleanup(s.st.Close)
	return s
}

// serveAgent connects bot's agent-wide runner through rc and runs Serve
// with h until the test ends; stop cancels Serve and returns what it
// returned.
func serveAgent(t *testing.T, rc *client.Client, ctx context.Context, h client.Handler) (stop func() error) {
	t.Helper()
	r, err := rc.ConnectAgentRunner(ctx, "bot")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- r.Serve(sctx, h) }()
	t.Cleanup(func() { cancel(); r.Close() })
	return func() error { cancel(); return <-errc }
}

// TestAgentRunnerServesEveryConversation: one agent-wide runner answers
// the prompts of every conversation its agent takes part in, side by side
// (an answer blocked in one conversation holds up none in another), one at
// a time in each; a stop cancels only its own conversation's answer, and a
// conversation deleted under an answer ends that answer while the runner
// goes on in the others.
func TestAgentRunnerServesEveryConversation(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	a, b := botConversation(t, c, ctx), botConversation(t, c, ctx)
	started := make(chan string, 4)
	var mu sync.Mutex
	seen := map[string]string{} // prompt → the conversation its Reply named
	stop := serveAgent(t, c, ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		mu.Lock()
		seen[rp.Prompt.PromptID] = rp.Prompt.ConversationID
		mu.Unlock()
		return blocking(started).Answer(ctx, rp)
	}))

	a.ask("a1", "block", "")
	if got := <-started; got != "a1" {
		t.Fatalf("started %s, want a1", got)
	}
	a.ask("a2", "second in a", "") // waits for a1: one answer at a time in a conversation
	b.ask("b1", "first in b", "")
	if how := b.ended("b1"); how != "completed" {
		t.Fatalf("b1 %s while a1 was answered", how)
	}
	if ms := b.answers("b1"); len(ms) != 1 || ms[0].Content != "echo: first in b" || ms[0].Status != parley.StatusComplete {
		t.Fatalf("the answer in b: %s", contents(ms))
	}
	if ms := a.answers("a2"); len(ms) != 0 {
		t.Fatalf("a2 was answered while a1 was: %s", contents(ms))
	}
	if err := c.Stop(ctx, a.id); err != nil {
		t.Fatal(err)
	}
	if how := a.ended("a1"); how != "canceled: aborted" {
		t.Fatalf("the stopped a1 %s", how)
	}
	if how := a.ended("a2"); how != "completed" {
		t.Fatalf("a2 %s", how)
	}
	if ms := a.answers("a1"); len(ms) != 1 || ms[0].Content != "partial" || ms[0].Status != parley.StatusCanceled {
		t.Fatalf("the stopped answer in a: %s", contents(ms))
	}
	if ms := a.answers("a2"); len(ms) != 1 || ms[0].Content != "echo: second in a" {
		t.Fatalf("a2's answer: %s", contents(ms))
	}

	// b is deleted under an answer: the runner goes on in a.
	b.ask("b2", "block", "")
	if got := <-started; got != "b2" {
		t.Fatalf("started %s, want b2", got)
	}
	if err := c.DeleteConversation(ctx, b.id); err != nil {
		t.Fatal(err)
	}
	a.ask("a3", "after the delete", "")
	if how := a.ended("a3"); how != "completed" {
		t.Fatalf("a3 %s", how)
	}
	mu.Lock()
	want := map[string]string{"a1": a.id, "a2": a.id, "a3": a.id, "b1": b.id, "b2": b.id}
	for p, conv := range want {
		if seen[p] != conv {
			t.Errorf("the Reply of %s named conversation %q, want %q", p, seen[p], conv)
		}
	}
	mu.Unlock()
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v, want context.Canceled", err)
	}
}

// TestAgentRunnerReconnectsAndGoesOn: an agent-wide runner's connection is
// lost while it answers in two conversations at once; both answers go on
// after the reconnect, each in its own message with every delta once.
func TestAgentRunnerReconnectsAndGoesOn(t *testing.T) {
	t.Parallel()
	_, url, ctx := serve(t, engine.Options{}, api.Options{Open: true})
	c := client.New(url, "")
	a, b := botConversation(t, c, ctx), botConversation(t, c, ctx)
	d := &cutter{}
	step, goOn := make(chan string, 2), make(chan struct{})
	serveAgent(t, d.client(url), ctx, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		if err := rp.Text(ctx, "one "); err != nil {
			return err
		}
		step <- rp.Prompt.PromptID
		<-goOn
		if err := rp.Text(ctx, "two "); err != nil {
			return err
		}
		return rp.Text(ctx, "three")
	}))
	a.ask("pa", "cut", "")
	b.ask("pb", "cut", "")
	got := []string{<-step, <-step}
	slices.Sort(got)
	if strings.Join(got, " ") != "pa pb" {
		t.Fatalf("answers under way: %v", got)
	}
	d.cutAll()
	close(goOn)
	for _, s := range []*served{a, b} {
		p := "p" + map[*served]string{a: "a", b: "b"}[s]
		if how := s.ended(p); how != "completed" {
			t.Fatalf("%s %s", p, how)
		}
		if ms := s.answers(p); len(ms) != 1 || ms[0].Content != "one two three" || ms[0].Status != parley.StatusComplete {
			t.Fatalf("the answer to %s across the cut: %s", p, contents(ms))
		}
	}
}

// TestAgentRunnerByHand: Next yields the prompts of any conversation,
// naming it; the frames sent through In name it too, and a frame sent on
// the agent-wide runner itself, naming none, is refused.
func TestAgentRunnerByHand(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	a := botConversation(t, c, ctx)
	r, err := c.ConnectAgentRunner(ctx, "bot")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a.ask("p1", "hello", "")
	p, err := r.Next(ctx)
	if err != nil || p.Type != "prompt" || p.PromptID != "p1" || p.ConversationID != a.id {
		t.Fatalf("Next: %+v, %v", p, err)
	}
	if _, err := r.Create(ctx, "m1"); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("a frame naming no conversation: %v, want invalid_value", err)
	}
	in := r.In(p.ConversationID)
	if _, err := in.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Text(ctx, "m1", "hi"); err != nil {
		t.Fatal(err)
	}
	if m, err := in.State(ctx, "m1"); err != nil || m.Content != "hi" || m.ReplyTo != "p1" {
		t.Fatalf("State: %+v, %v", m, err)
	}
	if _, err := in.Finalize(ctx, "m1", parley.FinishEndTurn, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if how := a.ended("p1"); how != "completed" {
		t.Fatalf("p1 %s", how)
	}
}
