package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// The demo's pace: a word every demoWordPause, a tool call runs
// demoToolPause. Slow enough to watch an answer grow, and to stop it.
const (
	demoWordPause = 60 * time.Millisecond
	demoToolPause = 800 * time.Millisecond
	// Every demoFailoverEvery-th answer fails over once first (the
	// supervisor resets its turn and tries again), every demoClaimEvery-th
	// is reviewed by a reviewer that claims the next turn first and reads
	// for demoReadPause while it holds it, and every demoNoteEvery-th is
	// followed by another message nobody answers.
	demoFailoverEvery = 4
	demoClaimEvery    = 2
	demoReadPause     = 600 * time.Millisecond
	demoNoteEvery     = 9
)

// errStopped ends an answer that was asked to stop: an abort of its
// prompt came (a person's stop or steer, a revert), or the server refused
// one of its frames (its message was reverted).
var errStopped = errors.New("the answer was stopped")

// exchange is the supervisor answering one prompt.
type exchange struct {
	*scene
	r       *client.Runner
	prompt  client.Push
	pushes  <-chan client.Push
	stopped bool
	prompts []client.Push // prompts pushed meanwhile, for after this one
}

// answer answers the prompt: the script, then complete; or, once asked to
// stop, aborted (which ends the message canceled and the prompt). It
// returns an error only when the runner's connection failed.
func (x *exchange) answer(ctx context.Context) error {
	x.answers++
	err := x.script(ctx)
	var refused *parley.Error
	switch {
	case ctx.Err() != nil:
		return nil
	case err == nil:
		_, err = x.r.Complete(ctx)
	case errors.Is(err, errStopped) || errors.As(err, &refused):
		x.log.Info("demo answer stopped", slog.String("prompt", x.prompt.PromptID), slog.Any("why", err))
		_, err = x.r.Aborted(ctx)
	}
	if errors.As(err, &refused) {
		// Nothing left to end (the conversation closed, say): the prompt
		// is no longer this runner's. Nothing to retry either.
		x.log.Info("the server refused the end of a demo answer", slog.Any("err", err))
		return nil
	}
	return err
}

// script is one answer: now and then a failed attempt first, after which
// the supervisor resets its turn and tries again; then text streamed word
// by word, a search tool call (running, then completed), the worker's part
// in the same turn, the conclusion, now and then a deploy a person must
// approve first; then the reviewer's reply in a thread under it, now and
// then after claiming the turn for it.
func (x *exchange) script(ctx context.Context) error {
	question, answer := x.prompt.Content, demoAnswerFor(x.prompt.Content)
	retryOf := ""
	if x.answers%demoFailoverEvery == 0 {
		retryOf = "attempt-" + uuid.NewString()
		if err := x.check(x.r.Create(ctx, retryOf)); err != nil {
			return err
		}
		if err := x.say(ctx, retryOf, "Let me think about that for a moment, "); err != nil {
			return err
		}
		if err := x.check(x.r.Failover(ctx, retryOf, "the model's connection dropped (a scripted failover); trying again")); err != nil {
			return err
		}
		x.reset(ctx)
	}
	id := "answer-" + uuid.NewString()
	if err := x.check(x.r.CreateWith(ctx, id, client.CreateOptions{RetryOf: retryOf})); err != nil {
		return err
	}
	if err := x.say(ctx, id, "Let me look that up. "); err != nil {
		return err
	}
	call := "search-" + id[len("answer-"):][:8]
	args, _ := json.Marshal(map[string]string{"query": question})
	if err := x.check(x.r.Tool(ctx, id, client.ToolUpdate{CallID: call, ToolName: "search", Status: parley.ToolRunning, Args: args})); err != nil {
		return err
	}
	if err := x.pause(ctx, demoToolPause); err != nil {
		return err
	}
	result, _ := json.Marshal(map[string]string{"answer": answer, "source": "the demo's notes"})
	if err := x.check(x.r.Tool(ctx, id, client.ToolUpdate{CallID: call, ToolName: "search", Status: parley.ToolCompleted, Result: result})); err != nil {
		return err
	}
	if err := x.say(ctx, id, "I found it, and asked the worker to double-check. "); err != nil {
		return err
	}
	x.work(ctx, answer)
	if err := x.say(ctx, id, "The answer is "+answer+"."); err != nil {
		return err
	}
	if asker, ok := x.approves(); ok {
		if err := x.approve(ctx, asker, id, answer); err != nil {
			return err
		}
	}
	if err := x.check(x.r.Finalize(ctx, id, parley.FinishEndTurn, "")); err != nil {
		return err
	}
	x.review(ctx, id)
	if x.answers%demoNoteEvery == 0 {
		if err := x.note(ctx); err != nil {
			x.log.Info("the demo's note was not written", slog.Any("err", err))
		}
	}
	return x.check(0, nil)
}

// work delegates to the worker, which writes its part into the
// supervisor's open turn (the same turn and turnId). A refusal (the turn
// was reverted or aborted meanwhile) only leaves its part out.
func (x *exchange) work(ctx context.Context, answer string) {
	if _, err := x.c.Delegate(ctx, x.id, demoSupervisor, demoWorker); err != nil {
		x.log.Info("the demo's delegation was refused", slog.Any("err", err))
		return
	}
	args, _ := json.Marshal(map[string]string{"claim": answer})
	parts := []parley.Part{
		{Type: parley.PartToolCall, CallID: "verify-" + uuid.NewString()[:8], ToolName: "verify", Status: parley.ToolCompleted, Args: args, Result: json.RawMessage(`{"verified":true}`)},
		{Type: parley.PartText, Text: "Double-checked “" + answer + "” against a second source: it holds."},
	}
	if _, err := x.c.PostMessage(ctx, x.id, client.Message{AgentID: demoWorker, Parts: parts}); err != nil {
		x.log.Info("the demo's worker was refused", slog.Any("err", err))
	}
}

// reset marks the supervisor's turn reset after a failed attempt, as an
// agent that starts over within its turn does: the retry continues the
// same turn (and clears the mark). A refusal (the turn was aborted or
// reverted meanwhile) only leaves the mark out.
func (x *exchange) reset(ctx context.Context) {
	if _, err := x.c.Reset(ctx, x.id, demoSupervisor, false); err != nil {
		x.log.Info("the demo's reset was refused", slog.Any("err", err))
	}
}

// review replies to the answer in a thread, in the reviewer's own turn.
// Every demoClaimEvery-th time it claims that turn first, so that nobody
// else takes the floor while it reads the answer, then writes (which
// opens the claimed turn and ends the claim).
func (x *exchange) review(ctx context.Context, answer string) {
	if x.aborted() {
		return
	}
	if x.answers%demoClaimEvery == 1 {
		if _, err := x.c.Claim(ctx, x.id, demoReviewer, 0); err != nil {
			x.log.Info("the demo's claim was refused", slog.Any("err", err))
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(demoReadPause):
			}
		}
	}
	_, err := x.c.PostMessage(ctx, x.id, client.Message{AgentID: demoReviewer, ReplyTo: answer, Finality: parley.FinalityTurn,
		Content: "Reviewed: sourced, and double-checked by the worker. Looks good to me."})
	if err != nil {
		x.log.Info("the demo's review was refused", slog.Any("err", err))
	}
}

// say streams text a word at a time.
func (x *exchange) say(ctx context.Context, id, text string) error {
	for _, w := range strings.SplitAfter(text, " ") {
		if w == "" {
			continue
		}
		if err := x.check(x.r.Text(ctx, id, w)); err != nil {
			return err
		}
		if err := x.pause(ctx, demoWordPause); err != nil {
			return err
		}
	}
	return nil
}

// check passes on a frame's error and stops the answer once its prompt
// was aborted.
func (x *exchange) check(_ int64, err error) error {
	if err != nil {
		return err
	}
	if x.aborted() {
		return errStopped
	}
	return nil
}

// pause waits d, or less if the answer is stopped meanwhile.
func (x *exchange) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return x.check(0, nil)
		case p := <-x.pushes:
			x.take(p)
			if x.stopped {
				return errStopped
			}
		}
	}
}

// aborted takes every push waiting and reports whether the prompt being
// answered was aborted.
func (x *exchange) aborted() bool {
	for {
		select {
		case p := <-x.pushes:
			x.take(p)
		default:
			return x.stopped
		}
	}
}

// take notes one push: an abort of this prompt stops the answer, a prompt
// waits for its turn, a revert concerns messages this answer will learn
// of when a frame is refused.
func (x *exchange) take(p client.Push) {
	switch p.Type {
	case "abort":
		if p.PromptID == "" || p.PromptID == x.prompt.PromptID {
			x.stopped = true
		}
	case "prompt":
		x.prompts = append(x.prompts, p)
	}
}

func demoAnswerFor(q string) string {
	switch {
	case strings.Contains(q, "Australia"):
		return "Canberra"
	case strings.Contains(q, "leap year"):
		return "366"
	case strings.Contains(q, "planet"):
		return "Jupiter"
	case strings.Contains(q, "17 times 23"):
		return "391"
	case q == demoScheduledPrompt:
		return "yes, every question so far has its answer"
	}
	return "42 (the demo's agents are scripted: they give this answer to every question they do not know)"
}

// self is how to run this binary again from the shell it was started in:
// as it was invoked (./parley, or parley from the PATH), or plain parley
// when go run built it in a temporary directory.
func self() string {
	p := os.Args[0]
	if strings.Contains(p, "go-build") {
		return "parley"
	}
	return p
}
