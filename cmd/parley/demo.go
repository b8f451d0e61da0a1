package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// runDemo serves with a scripted runner: a "human" asks a question every
// few seconds through the prompt queue, and an "assistant" runner streams
// each answer with text and a tool call, so that a newcomer sees a live
// conversation in `parley tail` with no setup.
func runDemo(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	dbPath := fs.String("db", "./parley-demo.db", "SQLite database file for the demo")
	addr := fs.String("addr", "127.0.0.1:7700", "listen address (loopback: the demo runs open)")
	every := fs.Duration("every", 8*time.Second, "how often the scripted user asks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !isLoopback(*addr) {
		return fmt.Errorf("the demo runs without tokens, so only on a loopback address, not %s", *addr)
	}
	return serve(ctx, []string{"-db", *dbPath, "-addr", *addr}, stderr, func(ctx context.Context, url string, log *slog.Logger) {
		if err := demo(ctx, url, *every, log); err != nil && ctx.Err() == nil {
			log.Error("demo stopped", slog.Any("err", err))
		}
	})
}

var demoQuestions = []string{
	"What is the capital of Australia?",
	"How many days are there in a leap year?",
	"Which planet is the largest?",
	"What is 17 times 23?",
}

func demo(ctx context.Context, url string, every time.Duration, log *slog.Logger) error {
	c := client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "Parley demo", Participants: []string{"assistant"}})
	if err != nil {
		return err
	}
	id := v.Conversation.ID
	log.Info("demo running: follow it with 'parley tail' (or open its stream)", slog.String("conversation", id),
		slog.String("tail", "parley tail -server "+url+" "+id))
	runner, err := c.ConnectRunner(ctx, id, "assistant")
	if err != nil {
		return err
	}
	defer runner.Close()
	go func() { // the scripted user
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := c.Prompt(ctx, id, "human", demoQuestions[i%len(demoQuestions)], ""); err != nil && ctx.Err() == nil {
				log.Warn("demo prompt failed", slog.Any("err", err))
			}
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	for { // the scripted runner
		p, err := runner.Next(ctx)
		if err != nil {
			return err
		}
		if p.Type != "prompt" {
			continue
		}
		if err := demoAnswer(ctx, runner, p.Content); err != nil {
			return err
		}
	}
}

// demoAnswer streams one answer: text, a tool call, more text.
func demoAnswer(ctx context.Context, r *client.Runner, question string) error {
	turn := uuid.NewString()
	if _, err := r.Create(ctx, turn); err != nil {
		return err
	}
	say := func(text string) error {
		for _, w := range strings.SplitAfter(text, " ") {
			if w == "" {
				continue
			}
			if _, err := r.Text(ctx, turn, w); err != nil {
				return err
			}
			time.Sleep(60 * time.Millisecond)
		}
		return nil
	}
	if err := say("Let me look that up for you. "); err != nil {
		return err
	}
	args, _ := json.Marshal(map[string]string{"query": question})
	if _, err := r.Tool(ctx, turn, client.ToolUpdate{CallID: "lookup-" + turn[:8], ToolName: "lookup", Status: parley.ToolRunning, Args: args}); err != nil {
		return err
	}
	time.Sleep(400 * time.Millisecond)
	answer := demoAnswerFor(question)
	result, _ := json.Marshal(answer)
	if _, err := r.Tool(ctx, turn, client.ToolUpdate{CallID: "lookup-" + turn[:8], ToolName: "lookup", Status: parley.ToolCompleted, Result: result}); err != nil {
		return err
	}
	if err := say("The answer is " + answer + "."); err != nil {
		return err
	}
	if _, err := r.Finalize(ctx, turn, parley.FinishEndTurn, ""); err != nil {
		return err
	}
	_, err := r.Complete(ctx)
	return err
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
	}
	return "42"
}
