package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// approvalAsker is a runner that can ask a person to approve something in
// a streaming message and wait for the answer (an expired request is a
// denial with reason "expired").
type approvalAsker interface {
	AskApproval(ctx context.Context, messageID string, req parley.InputRequest) (parley.Approval, error)
}

// runnerAsker is the runner itself, once the Go SDK's runner can ask
// (Runner.AskApproval); nil before.
func runnerAsker(r *client.Runner) approvalAsker {
	if a, ok := any(r).(approvalAsker); ok {
		return a
	}
	return nil
}

// approves returns what asks for approval if this answer asks before it
// deploys: every approveEvery-th answer does, when its runner can ask.
func (x *exchange) approves() (approvalAsker, bool) {
	if x.approveEvery <= 0 || x.answers%x.approveEvery != 0 || x.askerOf == nil {
		return nil, false
	}
	a := x.askerOf(x.r)
	return a, a != nil
}

// approve asks a person, before the demo's deploy tool call runs, whether
// it may: the answer's message shows the request (the web UI draws an
// approval card for it, and its head lists it) and waits, its turn held,
// until someone answers or the request expires after the demo's approval
// wait, which is a denial: the demo never waits for ever. Then the call
// runs (approved) or ends in an error (denied), and the answer says which.
// It returns errStopped once the answer was stopped meanwhile (a stop
// cancels the request, which is a denial too).
func (x *exchange) approve(ctx context.Context, asker approvalAsker, id, answer string) error {
	if err := x.say(ctx, id, " I can deploy this answer to the team's FAQ page, once someone says yes. "); err != nil {
		return err
	}
	call := "deploy-" + id[len("answer-"):][:8]
	args, _ := json.Marshal(map[string]string{"page": "faq", "answer": answer})
	if err := x.check(x.r.Tool(ctx, id, client.ToolUpdate{CallID: call, ToolName: "deploy", Status: parley.ToolPending, Args: args})); err != nil {
		return err
	}
	a, err := asker.AskApproval(ctx, id, parley.InputRequest{
		RequestID: "approve-" + id[len("answer-"):], Kind: parley.InputApproval,
		ToolCallID: call, ToolName: "deploy", Args: args,
		Title:     "Deploy the answer to the FAQ page?",
		Detail:    "The supervisor would publish “" + answer + "” on the team's FAQ page. No answer within " + x.approvalWait.String() + " is a no.",
		ExpiresAt: parley.NewTime(time.Now().Add(x.approvalWait)),
		Answerers: []string{demoYou, demoHuman},
	})
	if err != nil {
		return err
	}
	if err := x.check(0, nil); err != nil {
		return err
	}
	x.log.Info("demo approval", slog.Bool("approved", a.Approved), slog.String("reason", a.Reason))
	if !a.Approved {
		why := a.Reason
		if why == "" {
			why = "denied"
		}
		if err := x.check(x.r.Tool(ctx, id, client.ToolUpdate{CallID: call, ToolName: "deploy", Status: parley.ToolError, Error: "not approved: " + why})); err != nil {
			return err
		}
		return x.say(ctx, id, "Not deploying it ("+why+"). ")
	}
	if err := x.check(x.r.Tool(ctx, id, client.ToolUpdate{CallID: call, ToolName: "deploy", Status: parley.ToolRunning})); err != nil {
		return err
	}
	if err := x.pause(ctx, demoToolPause); err != nil {
		return err
	}
	if err := x.check(x.r.Tool(ctx, id, client.ToolUpdate{CallID: call, ToolName: "deploy", Status: parley.ToolCompleted, Result: json.RawMessage(`{"deployed":true}`)})); err != nil {
		return err
	}
	return x.say(ctx, id, "Deployed. ")
}
