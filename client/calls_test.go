package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// TestListConversationsPagesAndIterates: pages of conversations newest
// first, continued by cursor; EachConversation walks every page; a title
// narrows the list; stopping the loop early stops the iteration.
func TestListConversationsPagesAndIterates(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	var want []string
	for i := range 5 {
		title := fmt.Sprintf("plan %d", i)
		if i%2 == 1 {
			title = fmt.Sprintf("notes %d", i)
		}
		v, err := c.CreateConversation(ctx, client.NewConversation{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{v.Conversation.ID}, want...) // newest first
	}
	p, err := c.ListConversations(ctx, client.ListConversationsOptions{Limit: 2})
	if err != nil || len(p.Conversations) != 2 || p.NextCursor == "" || p.Conversations[0].Conversation.ID != want[0] {
		t.Fatalf("first page %+v, %v", p, err)
	}
	p2, err := c.ListConversations(ctx, client.ListConversationsOptions{Limit: 2, Cursor: p.NextCursor})
	if err != nil || len(p2.Conversations) != 2 || p2.Conversations[0].Conversation.ID != want[2] {
		t.Fatalf("second page %+v, %v", p2, err)
	}
	var got []string
	for v, err := range c.EachConversation(ctx, client.ListConversationsOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Conversation.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("EachConversation gave %v, want %v", got, want)
	}
	// A message moves its conversation to the top; the filters narrow.
	if _, err := c.PostMessage(ctx, want[4], client.Message{AgentID: "alice", Content: "up"}); err != nil {
		t.Fatal(err)
	}
	if p, err := c.ListConversations(ctx, client.ListConversationsOptions{Limit: 1}); err != nil || len(p.Conversations) != 1 || p.Conversations[0].Conversation.ID != want[4] {
		t.Fatalf("after a message to the oldest: %+v, %v", p, err)
	}
	if p, err := c.ListConversations(ctx, client.ListConversationsOptions{Participant: "nobody", Metadata: map[string]string{"no": "such"}}); err != nil || len(p.Conversations) != 0 {
		t.Fatalf("a metadata filter nothing matches: %+v, %v", p, err)
	}
	var titles []string
	for v, err := range c.EachConversation(ctx, client.ListConversationsOptions{Title: "NOTES"}) {
		if err != nil {
			t.Fatal(err)
		}
		titles = append(titles, v.Conversation.Title)
	}
	if !slices.Equal(titles, []string{"notes 3", "notes 1"}) {
		t.Fatalf("titles with notes: %v", titles)
	}
	n := 0
	for range c.EachConversation(ctx, client.ListConversationsOptions{Limit: 1}) {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("the loop ran %d times after a break at 3", n)
	}
	for _, err := range c.EachConversation(ctx, client.ListConversationsOptions{Cursor: "not-a-cursor"}) {
		if parley.ErrorCode(err) != parley.EINVALID {
			t.Fatalf("a bad cursor: %v, want invalid_request", err)
		}
	}
}

// TestMessagesRepliesThreadsAndEvents: messages paged and filtered,
// replies, a thread, the log paged and iterated, and a trace.
func TestMessagesRepliesThreadsAndEvents(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	post := func(agent, replyTo, content string) *parley.Message {
		t.Helper()
		r, err := c.PostMessage(ctx, id, client.Message{AgentID: agent, ReplyTo: replyTo, Content: content, Finality: parley.FinalityTurn})
		if err != nil {
			t.Fatal(err)
		}
		return r.Message
	}
	root := post("a", "", "root")
	r1 := post("b", root.ID, "reply 1")
	r2 := post("a", root.ID, "reply 2")
	deep := post("b", r1.ID, "deep")

	var all []string
	for m, err := range c.EachMessage(ctx, id, client.ListMessagesOptions{PageOptions: client.PageOptions{Limit: 1}}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m.Content)
	}
	if !slices.Equal(all, []string{"root", "reply 1", "reply 2", "deep"}) {
		t.Fatalf("EachMessage in pages of 1: %v", all)
	}
	byB, err := c.ListMessages(ctx, id, client.ListMessagesOptions{AgentID: "b"})
	if err != nil || len(byB.Messages) != 2 || byB.Messages[0].ID != r1.ID || byB.NextAfter != 0 {
		t.Fatalf("b's messages: %+v, %v", byB, err)
	}
	after, err := c.ListMessages(ctx, id, client.ListMessagesOptions{PageOptions: client.PageOptions{After: r1.Seq, Limit: 1}})
	if err != nil || len(after.Messages) != 1 || after.Messages[0].ID != r2.ID || after.NextAfter != r2.Seq {
		t.Fatalf("the page after reply 1: %+v, %v", after, err)
	}
	exchange, err := c.ListMessages(ctx, id, client.ListMessagesOptions{TurnID: root.TurnID})
	if err != nil || len(exchange.Messages) == 0 {
		t.Fatalf("the messages of exchange %s: %+v, %v", root.TurnID, exchange, err)
	}
	for _, m := range exchange.Messages {
		if m.TurnID != root.TurnID {
			t.Fatalf("turnId filter %s gave a message of %s", root.TurnID, m.TurnID)
		}
	}

	var replies []string
	for m, err := range c.EachReply(ctx, id, root.ID, client.PageOptions{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, m.ID)
	}
	if !slices.Equal(replies, []string{r1.ID, r2.ID}) {
		t.Fatalf("replies to the root: %v, want %v", replies, []string{r1.ID, r2.ID})
	}
	if _, err := c.ListReplies(ctx, id, "nope", client.PageOptions{}); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("replies to an unknown message: %v", err)
	}
	th, err := c.Thread(ctx, id, r1.ID)
	if err != nil || th.Root.ID != root.ID || len(th.Ancestors) != 1 || th.Message.ID != r1.ID ||
		len(th.Descendants) != 1 || th.Descendants[0].ID != deep.ID || th.Descendants[0].Depth != 2 || th.Truncated {
		t.Fatalf("thread of reply 1: %+v, %v", th, err)
	}
	if th, err = c.ThreadAfter(ctx, id, root.ID, r1.Seq); err != nil || len(th.Descendants) != 2 || th.Descendants[0].Seq <= r1.Seq || th.NextAfter != 0 {
		t.Fatalf("the root's descendants after reply 1: %+v, %v", th, err)
	}

	ev, err := c.PostTrace(ctx, id, client.NewTrace{AgentID: "a", Payload: json.RawMessage(`{"tool":"grep","ms":12}`)})
	if err != nil || ev.Type != parley.EventTrace || ev.AgentID != "a" {
		t.Fatalf("trace: %+v, %v", ev, err)
	}
	if d, err := client.DecodeEvent(*ev); err != nil || !bytes.Equal(d.(*client.Trace).Payload, []byte(`{"tool":"grep","ms":12}`)) {
		t.Fatalf("the trace's data: %#v, %v", d, err)
	}
	var seqs []int64
	for e, err := range c.EachEvent(ctx, id, client.PageOptions{After: 1, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, e.Seq)
	}
	if len(seqs) != int(ev.Seq)-1 || seqs[0] != 2 || seqs[len(seqs)-1] != ev.Seq {
		t.Fatalf("events after 1: %v, want 2..%d", seqs, ev.Seq)
	}
	// Events with limit 0 asks for the server's default page.
	if es, next, err := c.Events(ctx, id, 0, 0); err != nil || len(es) != int(ev.Seq) || next != 0 {
		t.Fatalf("Events with no limit: %d events, next %d, %v", len(es), next, err)
	}
}

// TestTurnOptions: a claim with a TTL holds that long, a reset of a turn
// an agent does not own claims with Claim, and a delegate writes into the
// owner's turn.
func TestTurnOptions(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	res, err := c.ClaimWith(ctx, id, client.ClaimOptions{AgentID: "a", ExpectTurn: 1, TTL: 10 * time.Minute})
	if err != nil || !res.Claimed || res.Claim == nil || res.Claim.AgentID != "a" {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if held := res.Claim.ExpiresAt.Sub(res.Head.LastEventAt.Time); held < 9*time.Minute {
		t.Fatalf("a claim of 10 minutes holds %v after it was written", held)
	}
	if _, err := c.ClaimWith(ctx, id, client.ClaimOptions{AgentID: "b"}); parley.ErrorCode(err) != parley.ECLAIMCONFLICT {
		t.Fatalf("b claims a's claimed turn: %v", err)
	}
	if _, err := c.ClaimWith(ctx, id, client.ClaimOptions{AgentID: "a", TTL: time.Hour}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("a claim of an hour: %v, want invalid_value", err)
	}
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: "mine", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	res, err = c.ResetWith(ctx, id, client.ResetOptions{AgentID: "b", Claim: true})
	if err != nil || !res.Claimed || res.Claim == nil || res.Claim.AgentID != "b" || res.Claim.Turn != 2 {
		t.Fatalf("reset-and-claim: %+v, %v", res, err)
	}
}

// TestPromptQueueCalls: prompts wait in order while no runner is attached;
// promote and withdraw change the order; a full queue and mode reject are
// 409 busy with their details; Stop with nothing answered is 404.
func TestPromptQueueCalls(t *testing.T) {
	t.Parallel()
	limits := conv.DefaultLimits
	limits.MaxQueuedPrompts = 3
	_, url, ctx := serve(t, engine.Options{Limits: limits}, api.Options{Open: true})
	c := client.New(url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	for i := range 3 {
		res, err := c.QueuePrompt(ctx, id, client.NewPrompt{ID: fmt.Sprintf("p%d", i), AgentID: "human", Content: fmt.Sprintf("question %d", i)})
		if err != nil || res.ID != fmt.Sprintf("p%d", i) || len(res.Queue) != i+1 || res.Seq == 0 {
			t.Fatalf("prompt %d: %+v, %v", i, res, err)
		}
	}
	_, err = c.QueuePrompt(ctx, id, client.NewPrompt{AgentID: "human", Content: "one too many"})
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != 409 || se.Code() != parley.EBUSY || se.Err.Details["queueLength"] != float64(3) ||
		se.Err.Details["maxQueueLength"] != float64(3) || se.Err.Head == nil {
		t.Fatalf("a full queue: %#v", err)
	}
	if _, err := c.PromotePrompt(ctx, id, "p2", "human"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WithdrawPrompt(ctx, id, "p1", "human"); err != nil {
		t.Fatal(err)
	}
	q, err := c.Prompts(ctx, id)
	if err != nil || len(q) != 2 || q[0].ID != "p2" || q[1].ID != "p0" || q[0].Mode != client.ModeFollowup || q[0].AgentID != "human" || q[0].Runner != "" {
		t.Fatalf("the queue after promote p2 and withdraw p1: %+v, %v", q, err)
	}
	if _, err := c.WithdrawPrompt(ctx, id, "p1", "human"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("withdrawing p1 again: %v", err)
	}
	if _, err := c.QueuePrompt(ctx, id, client.NewPrompt{AgentID: "human", Content: "now?", Mode: client.ModeReject}); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("mode reject with a waiting queue: %v", err)
	}
	if err := c.Stop(ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("stop with nothing answered: %v, want not_found", err)
	}
}

// TestRevertAndTasks: a revert removes a message and those after it; a
// task is listed until it is deleted.
func TestRevertAndTasks(t *testing.T) {
	t.Parallel()
	c, ctx := server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	var ids []string
	for i := range 3 {
		r, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: fmt.Sprint(i), Finality: parley.FinalityTurn})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Message.ID)
	}
	res, err := c.Revert(ctx, id, ids[1], "a")
	if err != nil || !slices.Equal(res.Removed, ids[1:]) || res.Seq == 0 {
		t.Fatalf("revert: %+v, %v", res, err)
	}
	if ms, err := c.AllMessages(ctx, id, 0); err != nil || len(ms) != 1 || ms[0].ID != ids[0] {
		t.Fatalf("after the revert: %v, %v", ms, err)
	}
	if res, err := c.Revert(ctx, id, "nope", "a"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("reverting an unknown id: %+v, %v; want not_found", res, err)
	}
	if res, err := c.Revert(ctx, id, ids[1], "a"); err != nil || len(res.Removed) != 0 {
		t.Fatalf("reverting again: %+v, %v", res, err)
	}

	if _, err := c.CreateTask(ctx, client.NewTask{ID: "daily", ConversationID: id, AgentID: "a", Prompt: "report", Cron: "0 9 * * *"}); err != nil {
		t.Fatal(err)
	}
	ts, err := c.Tasks(ctx)
	if err != nil || len(ts) != 1 || ts[0].ID != "daily" || ts[0].Cron != "0 9 * * *" || ts[0].NextRunAt.IsZero() {
		t.Fatalf("tasks: %+v, %v", ts, err)
	}
	if err := c.DeleteTask(ctx, "daily"); err != nil {
		t.Fatal(err)
	}
	if ts, err := c.Tasks(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("tasks after the delete: %+v, %v", ts, err)
	}
}

// TestTokensAndIdentity: an open server acts as an admin until the first
// token; then a request without one is 401, an agent token acts as its
// agent, and a revoked token stops working.
func TestTokensAndIdentity(t *testing.T) {
	t.Parallel()
	_, url, ctx := serve(t, engine.Options{}, api.Options{Open: true})
	open := client.New(url, "")
	if err := open.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := open.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if who, err := open.WhoAmI(ctx); err != nil || !who.Open || who.Kind != parley.TokenAdmin {
		t.Fatalf("whoami on an open server: %+v, %v", who, err)
	}
	admin, err := open.CreateToken(ctx, client.NewToken{Kind: parley.TokenAdmin, Name: "ops"})
	if err != nil || admin.Secret == "" || admin.Kind != parley.TokenAdmin || admin.Name != "ops" || admin.ID == "" {
		t.Fatalf("admin token: %+v, %v", admin, err)
	}
	var se *client.StatusError
	if _, err := open.WhoAmI(ctx); !errors.As(err, &se) || se.Status != 401 || se.Code() != parley.EUNAUTHORIZED {
		t.Fatalf("no token once one exists: %v", err)
	}
	ac := client.New(url, admin.Secret)
	alice, err := ac.CreateToken(ctx, client.NewToken{Kind: parley.TokenAgent, AgentID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if who, err := client.New(url, alice.Secret).WhoAmI(ctx); err != nil || who.Kind != parley.TokenAgent || who.AgentID != "alice" || who.Open {
		t.Fatalf("alice's whoami: %+v, %v", who, err)
	}
	if _, err := client.New(url, alice.Secret).Tokens(ctx); parley.ErrorCode(err) != parley.EFORBIDDEN {
		t.Fatalf("an agent lists tokens: %v", err)
	}
	ts, err := ac.Tokens(ctx)
	if err != nil || len(ts) != 2 || ts[0].ID != admin.ID || ts[1].AgentID != "alice" {
		t.Fatalf("tokens: %+v, %v", ts, err)
	}
	if err := ac.RevokeToken(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(url, alice.Secret).WhoAmI(ctx); parley.ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Fatalf("a revoked token: %v", err)
	}
}

// TestRateLimitedSaysWhenToRetry: a 429 carries its code and how long to
// wait, from Retry-After.
func TestRateLimitedSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	_, url, ctx := serve(t, engine.Options{}, api.Options{Open: true, Guards: api.Guards{CreateRate: 0.01, CreateBurst: 1}})
	c := client.New(url, "")
	if _, err := c.CreateConversation(ctx, client.NewConversation{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateConversation(ctx, client.NewConversation{})
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != 429 || se.Code() != parley.ERATELIMITED || se.RetryAfter < time.Second || se.Message() == "" {
		t.Fatalf("over the create rate: %#v", err)
	}
}
