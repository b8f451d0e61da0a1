package client_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// TestEventTypeNamesAreTheServers: the SDK's names of the prompt and task
// event types are the server's.
func TestEventTypeNamesAreTheServers(t *testing.T) {
	t.Parallel()
	for got, want := range map[string]string{
		client.EventPromptQueued: parley.EventPromptQueued, client.EventPromptDispatched: parley.EventPromptDispatched,
		client.EventPromptAborted: parley.EventPromptAborted, client.EventPromptCompleted: parley.EventPromptCompleted,
		client.EventPromptCanceled: parley.EventPromptCanceled, client.EventPromptRequeued: parley.EventPromptRequeued,
		client.EventPromptPromoted: parley.EventPromptPromoted, client.EventTaskRun: conv.EventTaskRun,
	} {
		if got != want {
			t.Errorf("the SDK names %q what the server names %q", got, want)
		}
	}
}

// TestDecodeKnowsEveryEventType: every event type a server writes decodes
// to a type of its own, never to UnknownEvent.
func TestDecodeKnowsEveryEventType(t *testing.T) {
	t.Parallel()
	for _, typ := range parley.EventTypes() {
		d, err := client.DecodeEvent(parley.Event{Type: typ, Data: json.RawMessage(`{}`)})
		if _, unknown := d.(*client.UnknownEvent); err != nil || unknown || d.EventType() != typ {
			t.Errorf("%s decoded to %#v, %v", typ, d, err)
		}
	}
}

// TestDecodeEveryEventType drives a real server through every event type
// of the log (turns, claims, traces, delegations, streamed answers, the
// prompt queue in every state, a revert, a scheduled task's run), then
// decodes the whole log: every event decodes to its own type, with the
// data the test wrote.
func TestDecodeEveryEventType(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64 // how far the engine's clock is ahead
	sv, url, ctx := serve(t, engine.Options{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}, api.Options{Open: true})
	c := client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{ID: "every-event", Participants: []string{"bot"}, Members: []string{"human", "worker", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}})
	defer st.Close()
	waitFor := func(typ string) {
		t.Helper()
		for f, err := range st.Frames(ctx) {
			if err != nil {
				t.Fatalf("waiting for %s: %v", typ, err)
			}
			if d, err := f.Decode(); err != nil || d == nil && f.Event != nil {
				t.Fatalf("frame %+v: %v, %v", f, d, err)
			} else if f.Init != nil && d != nil {
				t.Fatalf("an init decoded to %#v", d)
			}
			if f.Event != nil && f.Event.Type == typ {
				return
			}
		}
	}

	must(c.PostMessage(ctx, id, client.Message{AgentID: "human", Role: parley.RoleUser, Content: "hi", Finality: parley.FinalityTurn}))
	renamed := "renamed"
	must(c.UpdateConversation(ctx, id, parley.ConversationPatch{Title: &renamed}))
	must(c.ClaimWith(ctx, id, client.ClaimOptions{AgentID: "bot", TTL: time.Millisecond}))
	waitFor(parley.EventClaimExpired)
	must(c.PostTrace(ctx, id, client.NewTrace{AgentID: "bot", Payload: json.RawMessage(`{"thought":"hmm"}`)}))
	must(c.Delegate(ctx, id, "bot", "worker"))
	must(c.Reset(ctx, id, "bot", false))
	must(c.AbortTurn(ctx, id, "bot", "gave up"))

	// A streamed answer to a prompt.
	r, err := c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	must(c.QueuePrompt(ctx, id, client.NewPrompt{ID: "p1", AgentID: "human", Content: "question"}))
	if p, err := r.Next(ctx); err != nil || p.PromptID != "p1" {
		t.Fatalf("the runner got %+v, %v", p, err)
	}
	must(r.Create(ctx, "a1"))
	must(r.Text(ctx, "a1", "hello"))
	must(r.Tool(ctx, "a1", client.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolCompleted, Result: json.RawMessage(`"found"`)}))
	must(r.Finalize(ctx, "a1", parley.FinishEndTurn, ""))
	must(r.Complete(ctx))
	r.Close()

	// Prompts for an agent with no runner: promoted, withdrawn; then
	// dispatched, requeued when its runner leaves, dispatched again and
	// stopped.
	must(c.QueuePrompt(ctx, id, client.NewPrompt{ID: "p2", AgentID: "human", Content: "second", To: "other"}))
	must(c.QueuePrompt(ctx, id, client.NewPrompt{ID: "p3", AgentID: "human", Content: "third", To: "other"}))
	must(c.PromotePrompt(ctx, id, "p3", "human"))
	must(c.WithdrawPrompt(ctx, id, "p2", "human"))
	r, err = c.ConnectRunner(ctx, id, "other")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := r.Next(ctx); err != nil || p.PromptID != "p3" {
		t.Fatalf("the runner got %+v, %v", p, err)
	}
	r.Close()
	waitFor(client.EventPromptRequeued)
	r, err = c.ConnectRunner(ctx, id, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if p, err := r.Next(ctx); err != nil || p.PromptID != "p3" {
		t.Fatalf("the runner got %+v, %v", p, err)
	}
	if err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Next(ctx); err != nil || p.Type != "abort" || p.PromptID != "p3" {
		t.Fatalf("the runner got %+v, %v; want an abort of p3", p, err)
	}
	must(r.Aborted(ctx))
	must(c.Revert(ctx, id, "a1", "bot"))

	// A scheduled task's run, once the clock has passed it.
	task, err := c.CreateTask(ctx, client.NewTask{ConversationID: id, AgentID: "human", Prompt: "tick", EveryMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Second))
	if err := sv.eng.FireDueTasks(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(client.EventTaskRun)

	seen := map[string][]client.EventData{}
	for e, err := range c.EachEvent(ctx, id, client.PageOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := client.DecodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, unknown := d.(*client.UnknownEvent); unknown || d.EventType() != e.Type {
			t.Fatalf("event %d (%s) decoded to %#v", e.Seq, e.Type, d)
		}
		seen[e.Type] = append(seen[e.Type], d)
	}
	one := func(typ string) client.EventData {
		t.Helper()
		if len(seen[typ]) == 0 {
			t.Fatalf("no %s event in the log", typ)
		}
		return seen[typ][0]
	}
	checks := []struct {
		typ string
		ok  func(d client.EventData) bool
	}{
		{parley.EventConversationCreated, func(d client.EventData) bool { return d.(*client.ConversationCreated).ID == id }},
		{parley.EventConversationUpdated, func(d client.EventData) bool {
			return d.(*client.ConversationUpdated).Title == "renamed" && d.(*client.ConversationUpdated).UpdatedBy == "admin"
		}},
		{parley.EventMessage, func(d client.EventData) bool { return d.(*client.MessageEvent).Content == "hi" }},
		{parley.EventTurnClaimed, func(d client.EventData) bool { return d.(*client.TurnClaimed).AgentID == "bot" }},
		{parley.EventClaimExpired, func(d client.EventData) bool { return d.(*client.ClaimExpired).AgentID == "bot" }},
		{parley.EventTrace, func(d client.EventData) bool { return string(d.(*client.Trace).Payload) == `{"thought":"hmm"}` }},
		{parley.EventDelegation, func(d client.EventData) bool { x := d.(*client.Delegation); return x.From == "bot" && x.To == "worker" }},
		{parley.EventTurnReset, func(d client.EventData) bool { return d.(*client.TurnReset).Turn == 2 }},
		{parley.EventTurnAborted, func(d client.EventData) bool { return d.(*client.TurnAborted).Reason == "gave up" }},
		{parley.EventChunk, func(d client.EventData) bool {
			x := d.(*client.Chunk)
			return x.MessageID == "a1" && x.Content == "hello"
		}},
		{parley.EventPartUpdated, func(d client.EventData) bool {
			x := d.(*client.PartUpdated)
			return x.Part.CallID == "c1" && x.Part.Status == parley.ToolCompleted && string(x.Part.Result) == `"found"`
		}},
		{parley.EventMessageUpdated, func(d client.EventData) bool {
			x := d.(*client.MessageUpdated)
			return x.ID == "a1" && x.Status == parley.StatusComplete && x.Content == "hello"
		}},
		{parley.EventMessagesRemoved, func(d client.EventData) bool { return d.(*client.MessagesRemoved).MessageIDs[0] == "a1" }},
		{client.EventPromptQueued, func(d client.EventData) bool {
			x := d.(*client.PromptQueued)
			return x.ID == "p1" && x.Content == "question"
		}},
		{client.EventPromptDispatched, func(d client.EventData) bool {
			x := d.(*client.PromptDispatched)
			return x.ID == "p1" && x.Runner == "bot"
		}},
		{client.EventPromptCompleted, func(d client.EventData) bool { return d.(*client.PromptCompleted).ID == "p1" }},
		{client.EventPromptPromoted, func(d client.EventData) bool { return d.(*client.PromptPromoted).ID == "p3" }},
		{client.EventPromptCanceled, func(d client.EventData) bool {
			x := d.(*client.PromptCanceled)
			return x.ID == "p2" && x.Reason == "withdrawn"
		}},
		{client.EventPromptRequeued, func(d client.EventData) bool { return d.(*client.PromptRequeued).ID == "p3" }},
		{client.EventPromptAborted, func(d client.EventData) bool {
			x := d.(*client.PromptAborted)
			return x.ID == "p3" && x.Runner == "other" && x.Reason == "stopped"
		}},
		{client.EventTaskRun, func(d client.EventData) bool { return d.(*client.TaskRun).TaskID == task.ID }},
	}
	for _, c := range checks {
		if d := one(c.typ); !c.ok(d) {
			t.Errorf("%s: %+v", c.typ, d)
		}
	}
	if last := seen[client.EventPromptCanceled]; len(last) != 2 || last[1].(*client.PromptCanceled).Reason != "aborted" {
		t.Errorf("prompt.canceled events: %+v; want p2 withdrawn, then p3 aborted", last)
	}
	run := one(client.EventTaskRun).(*client.TaskRun)
	queued := seen[client.EventPromptQueued]
	if q := queued[len(queued)-1].(*client.PromptQueued); q.TurnID != run.RunID || q.Content != "tick" {
		t.Errorf("the task's prompt %+v; want turnId %s", q, run.RunID)
	}
}

// TestDecodeEventRefusesBadDataAndKeepsUnknownTypes: data that is not
// what its type says is an error; a type the SDK does not know comes back
// undecoded.
func TestDecodeEventRefusesBadDataAndKeepsUnknownTypes(t *testing.T) {
	t.Parallel()
	if _, err := client.DecodeEvent(parley.Event{Seq: 4, Type: parley.EventChunk, Data: json.RawMessage(`{"content":7}`)}); err == nil {
		t.Fatal("a chunk whose content is a number decoded")
	}
	d, err := client.DecodeEvent(parley.Event{Type: "something.new", Data: json.RawMessage(`{"x":1}`)})
	if u, ok := d.(*client.UnknownEvent); err != nil || !ok || u.EventType() != "something.new" || string(u.Data) != `{"x":1}` {
		t.Fatalf("an unknown type: %#v, %v", d, err)
	}
	if d, err := (client.Frame{Type: "guidance", Guidance: &parley.Guidance{}}).Decode(); d != nil || err != nil {
		t.Fatalf("a guidance frame decoded to %#v, %v", d, err)
	}
}
