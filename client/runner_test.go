package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// runnerSetup returns a client of a real server, a conversation in it and
// a function that connects a runner of an agent to that conversation.
func runnerSetup(t *testing.T) (*client.Client, context.Context, string, func(agent string) *client.Runner) {
	t.Helper()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	return c, ctx, id, func(agent string) *client.Runner {
		t.Helper()
		r, err := c.ConnectRunner(ctx, id, agent)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// TestRunnerStateAfterReconnect: a runner that lost its connection asks
// State on a new one and learns what the server holds: the text of every
// acknowledged delta and its tool calls; an unknown message is ENOTFOUND,
// another agent's is EFORBIDDEN, and refusals carry the server's code.
func TestRunnerStateAfterReconnect(t *testing.T) {
	t.Parallel()
	c, ctx, id, connect := runnerSetup(t)
	r := connect("bot")
	if _, err := r.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"one ", "two "} {
		if _, err := r.Text(ctx, "m1", d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Tool(ctx, "m1", client.ToolUpdate{CallID: "c1", ToolName: "search", Status: parley.ToolRunning}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(ctx, "m1"); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("a second create of m1: %v, want busy", err)
	}
	r.Close()

	r2 := connect("bot")
	defer r2.Close()
	m, err := r2.State(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != parley.StatusStreaming || m.Content != "one two " || len(m.Parts) != 2 || m.Parts[1].CallID != "c1" || m.Parts[1].Status != parley.ToolRunning {
		t.Fatalf("state = %+v", m)
	}
	if _, err := r2.State(ctx, "nope"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("state of an unknown message: %v", err)
	}
	other := connect("other")
	defer other.Close()
	if _, err := other.State(ctx, "m1"); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("another agent's state: %v", err)
	}
	// It goes on where it was.
	if _, err := r2.Text(ctx, "m1", "three"); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Finalize(ctx, "m1", parley.FinishEndTurn, ""); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Message(ctx, id, "m1"); err != nil || m.Content != "one two three" || m.Status != parley.StatusComplete {
		t.Fatalf("after finalize: %+v, %v", m, err)
	}
}

// TestRunnerCallsWithDeadlinesNeverTakeAnotherReply: calls whose context
// ends at random moments, before or after their frame went out, never get
// another frame's reply: every seq a call returns holds that call's delta
// (with the deltas the server wrote in the same chunk: a call that gave up
// waiting lets the next frame go out while its own is on its way to disk).
// (A call cut off while its frame was being written closes the
// connection; the runner then reconnects and carries on.)
func TestRunnerCallsWithDeadlinesNeverTakeAnotherReply(t *testing.T) {
	t.Parallel()
	c, ctx, id, connect := runnerSetup(t)
	r := connect("bot")
	if _, err := r.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	acked := map[int64]string{}
	closed := 0
	for i := range 300 {
		d := fmt.Sprintf("d%d;", i)
		// Deadlines of 0 to 750 µs end around the commit's time (one sync
		// of the disk); one call in seven has time to spare, so that some
		// deltas are acknowledged whatever the disk.
		timeout := time.Duration(i%7) * 150 * time.Microsecond
		if i%7 == 6 {
			timeout = time.Second
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		seq, err := r.Text(cctx, "m1", d)
		expired := cctx.Err() != nil
		cancel()
		var pe *parley.Error
		switch {
		case err == nil:
			acked[seq] = d
		case errors.As(err, &pe):
			t.Fatalf("delta %d: %v", i, err)
		case !expired:
			// The connection was closed by a call cut off mid-write.
			closed++
			r.Close()
			r = connect("bot")
		}
	}
	r.Close()
	events, _, err := c.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for seq, d := range acked {
		var ch parley.Chunk
		// Deltas that reach the server while a commit is under way share
		// a chunk (and its seq): the delta must be one of its chunk's.
		if seq < 1 || seq > int64(len(events)) || json.Unmarshal(events[seq-1].Data, &ch) != nil || !slices.Contains(strings.SplitAfter(ch.Content, ";"), d) {
			t.Fatalf("delta %q was acknowledged at seq %d, which holds %s", d, seq, events[min(seq, int64(len(events)))-1].Data)
		}
	}
	t.Logf("%d deltas acknowledged, %d connections closed by a call cut off mid-write", len(acked), closed)
	if len(acked) == 0 {
		t.Fatal("no delta was acknowledged")
	}
}

// TestFailoverAndDelegation: a runner's attempt that fails over ends with
// an error but keeps its turn, the retry names it (RetryOf) in that same
// turn, and a worker it delegates to writes into the turn with the
// prompt's turnId. A task scheduled for the conversation is listed by its
// id until it is deleted.
func TestFailoverAndDelegation(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"sup"}, Members: []string{"worker", "human"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "sup")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	prompt, err := c.Ask(ctx, id, "human", "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := r.Next(ctx); err != nil || p.Type != "prompt" || p.PromptID != prompt {
		t.Fatalf("next: %+v %v", p, err)
	}
	if _, err := r.Create(ctx, "try-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "try-1", "Thinking"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Failover(ctx, "try-1", "the model went away"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Conversation(ctx, id); err != nil || v.Head.OpenTurn == nil || v.Head.OpenTurn.Owner != "sup" {
		t.Fatalf("after a failover the turn is not sup's: %+v %v", v, err)
	}
	if _, err := r.CreateWith(ctx, "try-2", client.CreateOptions{RetryOf: "try-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delegate(ctx, id, "sup", "worker"); err != nil {
		t.Fatal(err)
	}
	w, err := c.PostMessage(ctx, id, client.Message{AgentID: "worker", Content: "done my part"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "try-2", "Hello."); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finalize(ctx, "try-2", parley.FinishEndTurn, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := c.Messages(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*parley.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	first, retry, work := byID["try-1"], byID["try-2"], byID[w.Message.ID]
	if first == nil || retry == nil || work == nil {
		t.Fatalf("messages %v", msgs)
	}
	if first.Status != parley.StatusError || retry.Status != parley.StatusComplete || retry.RetryOf != "try-1" || first.RetryOf != "" {
		t.Fatalf("attempt %s, retry %s retryOf %q", first.Status, retry.Status, retry.RetryOf)
	}
	for _, m := range []*parley.Message{first, retry, work} {
		if m.Turn != first.Turn || m.TurnID != prompt {
			t.Fatalf("%s (%s) is in turn %d, exchange %q; want turn %d, exchange %q", m.ID, m.AgentID, m.Turn, m.TurnID, first.Turn, prompt)
		}
	}

	task, err := c.CreateTask(ctx, client.NewTask{ID: "every-second", ConversationID: id, AgentID: "human", Prompt: "tick", EveryMs: 1000})
	if err != nil || task.ID != "every-second" || task.AgentID != "human" || task.NextRunAt.IsZero() {
		t.Fatalf("task %+v %v", task, err)
	}
	if _, err := c.CreateTask(ctx, client.NewTask{ConversationID: id, AgentID: "human", Prompt: "tick", Cron: "@every 1s"}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("a descriptor: %v, want invalid_value", err)
	}
	if err := c.DeleteTask(ctx, "every-second"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTask(ctx, "every-second"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("deleting it again: %v, want not_found", err)
	}
}

// TestRunnerOptionsAndReconnect: a message that may not name a channel (it
// answers no prompt from one), one made with an OpenCode session, finalized with a final text and finality none (the
// turn stays the runner's); Reconnect replaces the connection, State works
// on the new one, and after Close it is refused. Deleting the conversation
// ends Next with the server's not_found.
func TestRunnerOptionsAndReconnect(t *testing.T) {
	t.Parallel()
	c, ctx, id, connect := runnerSetup(t)
	r := connect("bot")
	// A message answering no prompt from a channel may name none.
	if _, err := r.CreateWith(ctx, "m0", client.CreateOptions{Channel: &parley.Channel{Type: "slack", ID: "C9"}}); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("a message naming a channel of its own: %v, want forbidden", err)
	}
	if _, err := r.CreateWith(ctx, "m1", client.CreateOptions{OpenCodeSessionID: "ses_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "m1", "draft"); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := r.State(ctx, "m1"); err != nil || m.Content != "draft" || m.Status != parley.StatusStreaming {
		t.Fatalf("state after a reconnect: %+v, %v", m, err)
	}
	if _, err := r.FinalizeWith(ctx, "m1", client.FinalizeOptions{FinalText: "draft, and done", Finality: parley.FinalityNone}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Message(ctx, id, "m1")
	if err != nil || m.Content != "draft, and done" || m.Status != parley.StatusComplete || m.Channel != nil ||
		!strings.Contains(string(m.Metadata), `"opencodeSessionId":"ses_1"`) {
		t.Fatalf("m1: %+v, %v", m, err)
	}
	if v, err := c.Conversation(ctx, id); err != nil || v.Head.OpenTurn == nil || v.Head.OpenTurn.Owner != "bot" {
		t.Fatalf("after a finalize with finality none the turn is not bot's: %+v, %v", v, err)
	}
	if err := c.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	var se *client.StatusError
	if _, err := r.Next(ctx); !errors.As(err, &se) || se.Code() != parley.ENOTFOUND || se.Status != 0 {
		t.Fatalf("Next after the delete: %v, want the server's not_found", err)
	}
	r.Close()
	if err := r.Reconnect(ctx); !errors.Is(err, client.ErrRunnerClosed) {
		t.Fatalf("Reconnect after Close: %v", err)
	}
}

// TestTextAsyncKeepsDeltasInFlight: a runner sends 300 deltas without
// waiting for each (TextAsync, 32 in flight): they are applied in order,
// every one is acknowledged with the seq of a chunk that holds it, and the
// deltas that came while a commit was under way share chunks, so the log
// has fewer chunk events than deltas.
func TestTextAsyncKeepsDeltasInFlight(t *testing.T) {
	t.Parallel()
	c, ctx, id, connect := runnerSetup(t)
	r := connect("bot")
	defer r.Close()
	if _, err := r.Create(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	const n, window = 300, 32
	var inFlight []*client.Pending
	acked := map[string]int64{}
	wait := func() {
		p := inFlight[0]
		inFlight = inFlight[1:]
		seq, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acked[fmt.Sprintf("d%d;", len(acked))] = seq
	}
	var want strings.Builder
	for i := range n {
		d := fmt.Sprintf("d%d;", i)
		want.WriteString(d)
		p, err := r.TextAsync(ctx, "m1", d)
		if err != nil {
			t.Fatal(err)
		}
		if inFlight = append(inFlight, p); len(inFlight) == window {
			wait()
		}
	}
	for len(inFlight) > 0 {
		wait()
	}
	m, err := r.State(ctx, "m1")
	if err != nil || m.Content != want.String() {
		t.Fatalf("the message holds %q (%v), want every delta in order", m.Content, err)
	}
	events, _, err := c.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for _, e := range events {
		if e.Type == parley.EventChunk {
			chunks++
		}
	}
	for d, seq := range acked {
		ch, err := parley.ParseChunk(events[seq-1].Data)
		if err != nil || events[seq-1].Type != parley.EventChunk || !slices.Contains(strings.SplitAfter(ch.Content, ";"), d) {
			t.Fatalf("delta %q was acknowledged at seq %d, which holds %s", d, seq, events[seq-1].Data)
		}
	}
	if chunks >= n {
		t.Errorf("%d chunk events for %d deltas sent %d at a time: none shared a commit", chunks, n, window)
	}
	t.Logf("%d deltas in %d chunk events", n, chunks)
}
