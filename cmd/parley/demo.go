package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// The demo's cast. The supervisor, the reviewer and the scribe (which
// takes part through MCP only, demo_mcp.go) take turns (the
// participants); the others take part without the turn policy naming
// them (members): the worker the supervisor delegates to, the scripted
// person, the person using the web UI, and the scheduled task's agent.
const (
	demoSupervisor = "supervisor"
	demoReviewer   = "reviewer"
	demoWorker     = "worker"
	demoHuman      = "human"
	demoYou        = "you"
	demoScheduler  = "scheduler"
	// demoTaskID is the demo's scheduled task: one id for every run, so
	// that a new run replaces the task of the last one instead of leaving
	// it to queue prompts for ever in a conversation nobody answers.
	demoTaskID = "parley-demo-task"
)

// demoOptions are the demo's flags.
type demoOptions struct {
	every     time.Duration // how often the scripted person asks
	taskEvery time.Duration // the scheduled task's interval; a minute is cron "* * * * *"
	// approveEvery is how often an answer asks a person for approval
	// before it deploys (every so many answers; 0: never), and
	// approvalWait how long it waits for one before taking it as a no.
	approveEvery int
	approvalWait time.Duration
}

// runDemo serves with a scripted multi-agent scene in one conversation: a
// supervisor streams answers with a tool call and delegates to a worker,
// a reviewer replies in a thread (now and then claiming its turn first),
// a scribe that takes part only through MCP writes the minutes in its turn,
// some attempts fail over (the supervisor resets its turn and retries),
// now and then the supervisor asks a person to approve a deploy (taking
// no answer within a minute as a no), a task asks every minute, and a
// message waits unanswered; so that a
// newcomer sees every feature live in the web UI or in `parley tail`, with
// no setup.
func runDemo(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	dbPath := fs.String("db", "./parley-demo.db", "SQLite database file for the demo")
	addr := fs.String("addr", "127.0.0.1:7700", "listen address (loopback: the demo runs open)")
	var o demoOptions
	fs.DurationVar(&o.every, "every", 8*time.Second, "how often the scripted person asks (when no prompt is waiting)")
	fs.DurationVar(&o.taskEvery, "task-every", time.Minute, "how often the scheduled task asks: 1m is cron '* * * * *', anything else an interval of at least 1s")
	fs.IntVar(&o.approveEvery, "approve-every", 3, "every how many answers the supervisor asks a person to approve a deploy first (0: never)")
	fs.DurationVar(&o.approvalWait, "approval-wait", time.Minute, "how long the supervisor waits for that approval before taking it as a no")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !isLoopback(*addr) {
		return fmt.Errorf("the demo runs without tokens, so only on a loopback address, not %s", *addr)
	}
	if o.every <= 0 || o.taskEvery < time.Second {
		return fmt.Errorf("-every must be positive and -task-every at least 1s")
	}
	if o.approveEvery < 0 || o.approvalWait < time.Second {
		return fmt.Errorf("-approve-every must be 0 or more and -approval-wait at least 1s")
	}
	return serve(ctx, []string{"-db", *dbPath, "-addr", *addr}, stderr, func(ctx context.Context, url string, log *slog.Logger) {
		if err := demo(ctx, url, o, log); err != nil && ctx.Err() == nil {
			log.Error("demo stopped", slog.Any("err", err))
		}
	})
}

// scene is the demo's conversation and its scripted agents.
type scene struct {
	c       *client.Client
	id      string
	log     *slog.Logger
	answers int // prompts answered or stopped, for what happens now and then
	// approveEvery and approvalWait are demoOptions'.
	approveEvery int
	approvalWait time.Duration
	// askerOf makes what asks a person for approval of the runner that
	// answers (nil: the answer asks nobody).
	askerOf func(*client.Runner) approvalAsker
}

func demo(ctx context.Context, base string, o demoOptions, log *slog.Logger) error {
	return demoWith(ctx, base, o, log, runnerAsker)
}

// demoWith is demo, with the supervisor asking for approvals through what
// askerOf makes of its runner (nothing: it does not ask).
func demoWith(ctx context.Context, base string, o demoOptions, log *slog.Logger, askerOf func(*client.Runner) approvalAsker) error {
	c := client.New(base, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{
		Title:        "Parley demo: a supervisor, a worker, a reviewer and a scribe on MCP",
		Participants: []string{demoSupervisor, demoReviewer, demoScribe},
		Members:      []string{demoWorker, demoHuman, demoYou, demoScheduler},
	})
	if err != nil {
		return err
	}
	s := &scene{c: c, id: v.Conversation.ID, log: log, approveEvery: o.approveEvery, approvalWait: o.approvalWait, askerOf: askerOf}
	if err := s.schedule(ctx, o.taskEvery); err != nil {
		return err
	}
	if err := s.note(ctx); err != nil {
		return err
	}
	log.Info("demo running: open its conversation in a browser, or follow it in the terminal",
		slog.String("conversation", s.id), slog.String("ui", base+"/c/"+url.PathEscape(s.id)),
		slog.String("tail", self()+" tail -server "+base+" "+s.id),
		slog.String("you", "in the web UI you write as the member "+demoYou))
	go s.person(ctx, o.every)
	go s.scribe(ctx, base)
	return s.supervise(ctx)
}

// schedule replaces the demo's task (the last run's, if any) with one
// that asks in this conversation.
func (s *scene) schedule(ctx context.Context, every time.Duration) error {
	if err := s.c.DeleteTask(ctx, demoTaskID); err != nil && parley.ErrorCode(err) != parley.ENOTFOUND {
		return err
	}
	t := client.NewTask{ID: demoTaskID, ConversationID: s.id, AgentID: demoScheduler, Prompt: demoScheduledPrompt}
	if every == time.Minute {
		t.Cron = "* * * * *"
	} else {
		t.EveryMs = every.Milliseconds()
	}
	_, err := s.c.CreateTask(ctx, t)
	return err
}

// note posts the message nobody answers: a person's heads-up that closes
// its turn (so it goes to the agent named next) and that no message will
// ever reply to.
func (s *scene) note(ctx context.Context) error {
	_, err := s.c.PostMessage(ctx, s.id, client.Message{AgentID: demoHuman, Role: parley.RoleUser, Finality: parley.FinalityTurn,
		Content: "Heads-up: the staging database restarts tonight at 22:00 UTC. Nothing to do about it."})
	return err
}

var demoQuestions = []string{
	"What is the capital of Australia?",
	"How many days are there in a leap year?",
	"Which planet is the largest?",
	"What is 17 times 23?",
}

const demoScheduledPrompt = "Scheduled check: is everything still answered?"

// person is the scripted person: it asks a question every so often, but
// only when no prompt waits or is being answered (mode reject), so that
// the queue never grows however slowly the answers come.
func (s *scene) person(ctx context.Context, every time.Duration) {
	for i := 0; ; {
		_, err := s.c.Ask(ctx, s.id, demoHuman, demoQuestions[i%len(demoQuestions)], "reject")
		switch code := parley.ErrorCode(err); {
		case err == nil:
			i++
		case ctx.Err() != nil || code == parley.EBUSY: // busy: the same question next time
		case code == parley.ECLOSED || code == parley.ENOTFOUND:
			s.log.Info("the demo's conversation was closed or deleted: the scripted person stops asking", slog.String("conversation", s.id))
			return
		default:
			s.log.Warn("the scripted person could not ask", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// supervise keeps the supervisor's runner attached, connecting again if
// its connection ends, until ctx ends or the conversation is deleted (a
// connection ends then too, and connecting again says so).
func (s *scene) supervise(ctx context.Context) error {
	for ctx.Err() == nil {
		r, err := s.c.ConnectRunner(ctx, s.id, demoSupervisor)
		switch {
		case ctx.Err() != nil:
			return nil
		case parley.ErrorCode(err) == parley.ENOTFOUND:
			s.log.Info("the demo's conversation was deleted: the scripted agents stop", slog.String("conversation", s.id))
			return nil
		case err != nil:
			s.log.Warn("the supervisor's runner could not connect; trying again", slog.Any("err", err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		err = s.runner(ctx, r)
		r.Close()
		if ctx.Err() == nil {
			s.log.Info("the supervisor's runner lost its connection; connecting again", slog.Any("err", err))
		}
		select { // never a busy loop, whatever ends the connections
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// runner answers the prompts the server dispatches to r, one at a time.
// A reader goroutine hands every push over as it comes, so that an
// answer sees an abort between two deltas.
func (s *scene) runner(ctx context.Context, r *client.Runner) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pushes := make(chan client.Push, 16)
	errc := make(chan error, 1)
	go func() {
		for {
			p, err := r.Next(rctx)
			if err != nil {
				errc <- err
				return
			}
			select {
			case pushes <- p:
			case <-rctx.Done():
				return
			}
		}
	}()
	var waiting []client.Push // prompts that came while another was answered
	for {
		var p client.Push
		if len(waiting) > 0 {
			p, waiting = waiting[0], waiting[1:]
		} else {
			select {
			case p = <-pushes:
			case err := <-errc:
				return err
			case <-ctx.Done():
				return nil
			}
		}
		if p.Type != "prompt" {
			continue // an abort or a revert of something no longer answered
		}
		x := &exchange{scene: s, r: r, prompt: p, pushes: pushes}
		err := x.answer(ctx)
		waiting = append(waiting, x.prompts...)
		if err != nil {
			return err
		}
	}
}
