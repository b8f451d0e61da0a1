package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/tokens"
)

// The examples run against real servers, open, on loopback, each on a
// SQLite file in a temporary directory: serverURL's is shared, and
// newServerURL starts one of their own for an example that changes the
// server (a token ends open mode). TestMain stops them.
var (
	examples   sync.Mutex
	shared     string
	stopServer []func()
)

// serverURL returns the URL of a running Parley server (the examples'
// shared one).
func serverURL() string {
	examples.Lock()
	defer examples.Unlock()
	if shared == "" {
		shared = startServer()
	}
	return shared
}

// newServerURL returns the URL of a new server of the example's own.
func newServerURL() string {
	examples.Lock()
	defer examples.Unlock()
	return startServer()
}

// startServer starts a server; examples must be held.
func startServer() string {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "parley-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "parley.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tk := tokens.New(db, tokens.Options{})
	eng := engine.New(db, engine.Options{Connections: tk})
	rn := runners.New(eng, db, runners.Options{})
	srv := httptest.NewServer(api.New(eng, rn, reads.New(db, eng), tk, schedule.New(db, eng, schedule.Options{}), api.Options{Open: true}))
	stopServer = append(stopServer, func() { srv.Close(); rn.Close(); eng.Close(); db.Close(); os.RemoveAll(dir) })
	return srv.URL
}

func TestMain(m *testing.M) {
	code := m.Run()
	examples.Lock()
	for _, stop := range stopServer {
		stop()
	}
	examples.Unlock()
	os.Exit(code)
}

// A conversation: create it, write to it, read it back.
func Example() {
	ctx := context.Background()
	c := client.New(serverURL(), "") // a token, or "" on an open server

	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "review", Participants: []string{"alice", "bob"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	fmt.Println("next:", v.Guidance.NextAgentID)

	q, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "What is 6 x 7?", Finality: parley.FinalityTurn})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "bob", Content: "42", ReplyTo: q.Message.ID, Finality: parley.FinalityTurn}); err != nil {
		log.Fatal(err)
	}
	for m, err := range c.EachMessage(ctx, id, client.ListMessagesOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("turn %d, %s: %s\n", m.Turn, m.AgentID, m.Content)
	}
	// Output:
	// next: alice
	// turn 1, alice: What is 6 x 7?
	// turn 2, bob: 42
}

// Every page of a list, with an iterator: messages here; conversations,
// replies and events alike.
func ExampleClient_EachMessage() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"counter"}})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "counter", Content: fmt.Sprint(i)}); err != nil {
			log.Fatal(err)
		}
	}
	// Pages of 2, read as the loop goes; break stops reading.
	opts := client.ListMessagesOptions{PageOptions: client.PageOptions{Limit: 2}, AgentID: "counter"}
	for m, err := range c.EachMessage(ctx, v.Conversation.ID, opts) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(m.Content, " ")
	}
	fmt.Println()
	// Output: 0 1 2 3 4
}

// Conversations most recently active first, narrowed by title.
func ExampleClient_EachConversation() {
	ctx := context.Background()
	c := client.New(newServerURL(), "")
	for _, title := range []string{"Release plan", "Lunch", "release notes"} {
		if _, err := c.CreateConversation(ctx, client.NewConversation{Title: title}); err != nil {
			log.Fatal(err)
		}
	}
	for v, err := range c.EachConversation(ctx, client.ListConversationsOptions{Title: "release"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(v.Conversation.Title)
	}
	// Output:
	// release notes
	// Release plan
}

// The log's events, each decoded by its type.
func ExampleDecodeEvent() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	if _, err := c.PostTrace(ctx, id, client.NewTrace{AgentID: "alice", Payload: json.RawMessage(`{"tool":"grep"}`)}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "found it", Finality: parley.FinalityTurn}); err != nil {
		log.Fatal(err)
	}
	for e, err := range c.EachEvent(ctx, id, client.PageOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		d, err := client.DecodeEvent(e)
		if err != nil {
			log.Fatal(err)
		}
		switch d := d.(type) {
		case *client.ConversationCreated:
			fmt.Println(e.Seq, "created with", d.Participants)
		case *client.Trace:
			fmt.Println(e.Seq, "trace", string(d.Payload))
		case *client.MessageEvent:
			fmt.Println(e.Seq, "message from", d.AgentID+":", d.Content)
		default:
			fmt.Println(e.Seq, d.EventType())
		}
	}
	// Output:
	// 1 created with [alice]
	// 2 trace {"tool":"grep"}
	// 3 message from alice: found it
}

// An agent answers prompts: Serve calls the handler for each prompt it is
// given and completes the prompt when the handler returns (or cancels it
// on an abort, and reconnects if the connection is lost).
func ExampleRunner_Serve() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID

	r, err := c.ConnectRunner(ctx, id, "bot") // with an agent token, "" names its agent
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	serving, stop := context.WithCancel(ctx)
	defer stop()
	go r.Serve(serving, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		// A model streams its answer here; ctx ends if the answer is aborted.
		for _, delta := range []string{"6 x 7", " is", " 42."} {
			if err := rp.Text(ctx, delta); err != nil {
				return err
			}
		}
		return nil // Serve ends the message and completes the prompt
	}))

	p, err := c.QueuePrompt(ctx, id, client.NewPrompt{AgentID: "human", Content: "What is 6 x 7?"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer(ctx, c, id, p.ID))
	// Output: 6 x 7 is 42.
}

// answer follows a conversation from its start until the answer to prompt
// finishes, and returns its text.
func answer(ctx context.Context, c *client.Client, id, prompt string) string {
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}})
	defer st.Close()
	for u, err := range client.NewAccumulator(c, id).Updates(ctx, st) {
		if err != nil {
			log.Fatal(err)
		}
		if u.Finished && u.Message.ReplyTo == prompt {
			return u.Message.Content
		}
	}
	return ""
}

// A conversation's stream folded into its messages: each update says
// which message changed and whether it just finished.
func ExampleAccumulator() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for _, f := range []func() (int64, error){
		func() (int64, error) { return r.Create(ctx, "m1") },
		func() (int64, error) { return r.Text(ctx, "m1", "Hello") },
		func() (int64, error) { return r.Text(ctx, "m1", ", world") },
		func() (int64, error) { return r.Finalize(ctx, "m1", parley.FinishEndTurn, "") },
	} {
		if _, err := f(); err != nil {
			log.Fatal(err)
		}
	}

	acc := client.NewAccumulator(c, id)
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}}) // the whole log
	defer st.Close()
	for u, err := range acc.Updates(ctx, st) {
		if err != nil {
			log.Fatal(err)
		}
		if u.Message != nil {
			fmt.Printf("%s %q finished=%v\n", u.Data.EventType(), u.Message.Content, u.Finished)
		}
		if u.Finished {
			break
		}
	}
	fmt.Println(len(acc.Messages()), "message:", acc.Message("m1").Content)
	// Output:
	// message "" finished=false
	// chunk "Hello" finished=false
	// chunk "Hello, world" finished=false
	// message.updated "Hello, world" finished=true
	// 1 message: Hello, world
}

// Frames of a live stream, with an iterator; it resumes by itself after a
// lost connection.
func ExampleStream_Frames() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "hi", Finality: parley.FinalityTurn}); err != nil {
		log.Fatal(err)
	}
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0}, Transport: client.WebSocket})
	defer st.Close()
	for f, err := range st.Frames(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		switch {
		case f.Init != nil:
			fmt.Println("init, recovered:", f.Init.Recovered)
		case f.Event != nil:
			fmt.Println("event", f.Event.Seq, f.Event.Type)
		case f.Guidance != nil:
			fmt.Println("guidance: next is", f.Guidance.NextAgentID)
		}
		if f.Event != nil && f.Event.Type == parley.EventMessage {
			break
		}
	}
	// Output:
	// init, recovered: true
	// event 1 conversation.created
	// event 2 message
}

// The server's refusals are *StatusError: its status, code, message and,
// for a turn conflict, the head to decide again with.
func ExampleStatusError() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"alice", "bob"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: "thinking…"}); err != nil {
		log.Fatal(err)
	}
	_, err = c.PostMessage(ctx, id, client.Message{AgentID: "bob", Content: "me first"})
	var se *client.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.Status, se.Code(), "owner:", se.Err.Head.OpenTurn.Owner)
	}
	fmt.Println(parley.ErrorCode(err) == parley.ETURNCONFLICT)
	// Output:
	// 409 turn_conflict owner: alice
	// true
}

// The prompt queue: prompts wait for a runner; promote and withdraw them.
func ExampleClient_QueuePrompt() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	for _, q := range []string{"first", "second", "third"} {
		if _, err := c.QueuePrompt(ctx, id, client.NewPrompt{ID: q, AgentID: "human", Content: "the " + q + " question"}); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := c.PromotePrompt(ctx, id, "third", "human"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.WithdrawPrompt(ctx, id, "first", "human"); err != nil {
		log.Fatal(err)
	}
	queue, err := c.Prompts(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range queue {
		fmt.Println(p.ID, p.Mode)
	}
	// Output:
	// third followup
	// second followup
}

// A message with its ancestors and replies.
func ExampleClient_Thread() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a", "b"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	post := func(agent, replyTo, text string) string {
		r, err := c.PostMessage(ctx, id, client.Message{AgentID: agent, ReplyTo: replyTo, Content: text, Finality: parley.FinalityTurn})
		if err != nil {
			log.Fatal(err)
		}
		return r.Message.ID
	}
	root := post("a", "", "Ship on Friday?")
	objection := post("b", root, "Tests are red.")
	post("a", objection, "Fixed.")

	th, err := c.Thread(ctx, id, objection)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("root:", th.Root.Content)
	fmt.Println("message:", th.Message.Content, "depth", th.Message.Depth)
	for _, d := range th.Descendants {
		fmt.Println("reply:", d.Content, "depth", d.Depth)
	}
	// Output:
	// root: Ship on Friday?
	// message: Tests are red. depth 1
	// reply: Fixed. depth 2
}

// Revert removes a message and every message after it.
func ExampleClient_Revert() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	var ids []string
	for _, text := range []string{"keep", "undo", "and this"} {
		r, err := c.PostMessage(ctx, id, client.Message{AgentID: "a", Content: text, Finality: parley.FinalityTurn})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, r.Message.ID)
	}
	res, err := c.Revert(ctx, id, ids[1], "a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("removed", len(res.Removed))
	for m, err := range c.EachMessage(ctx, id, client.ListMessagesOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Content)
	}
	// Output:
	// removed 2
	// keep
}

// Claims and delegation: claim the next turn for a while, then let a
// worker write into it.
func ExampleClient_ClaimWith() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"lead"}, Members: []string{"worker"}})
	if err != nil {
		log.Fatal(err)
	}
	id := v.Conversation.ID
	res, err := c.ClaimWith(ctx, id, client.ClaimOptions{AgentID: "lead", ExpectTurn: 1, TTL: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claimed turn", res.Claim.Turn)
	if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "lead", Content: "on it"}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Delegate(ctx, id, "lead", "worker"); err != nil {
		log.Fatal(err)
	}
	w, err := c.PostMessage(ctx, id, client.Message{AgentID: "worker", Content: "my part"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the worker wrote in turn", w.Turn)
	// Output:
	// claimed turn 1
	// the worker wrote in turn 1
}

// A task queues a prompt on a schedule.
func ExampleClient_CreateTask() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"bot"}, Members: []string{"ops"}})
	if err != nil {
		log.Fatal(err)
	}
	task, err := c.CreateTask(ctx, client.NewTask{ID: "standup", ConversationID: v.Conversation.ID, AgentID: "ops", Prompt: "Summarize yesterday.", Cron: "0 9 * * 1-5"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.ID, task.Cron, "next at", task.NextRunAt.Format("15:04 MST"))
	if err := c.DeleteTask(ctx, task.ID); err != nil {
		log.Fatal(err)
	}
	tasks, err := c.Tasks(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tasks), "tasks")
	// Output:
	// standup 0 9 * * 1-5 next at 09:00 UTC
	// 0 tasks
}

// Export a conversation and import it under another id.
func ExampleClient_Export() {
	ctx := context.Background()
	c := client.New(serverURL(), "") // import needs an admin token
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"a"}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, v.Conversation.ID, client.Message{AgentID: "a", Content: "worth keeping"}); err != nil {
		log.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := c.Export(ctx, v.Conversation.ID, "jsonl", &file); err != nil {
		log.Fatal(err)
	}
	res, err := c.Import(ctx, &file, client.ImportOptions{ID: v.Conversation.ID + "-copy"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Source, res.Messages, "message")
	m, _, err := c.Messages(ctx, res.Conversation.ID, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m[0].Content)
	// Output:
	// export 1 message
	// worth keeping
}

// Back up the whole server into a file of its own (an admin token).
func ExampleClient_Backup() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	f, err := os.CreateTemp("", "parley-backup-*.db")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	n, err := c.Backup(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err) // the file is not a whole backup
	}
	fmt.Println(n > 0)
	// Output: true
}

// Tokens: the first one ends open mode; each acts as its kind and agent.
func ExampleClient_CreateToken() {
	ctx := context.Background()
	url := newServerURL() // a server of its own: a token ends open mode
	open := client.New(url, "")
	admin, err := open.CreateToken(ctx, client.NewToken{Kind: parley.TokenAdmin, Name: "ops"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = open.WhoAmI(ctx)
	fmt.Println("without a token:", parley.ErrorCode(err))

	alice, err := client.New(url, admin.Secret).CreateToken(ctx, client.NewToken{Kind: parley.TokenAgent, AgentID: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	who, err := client.New(url, alice.Secret).WhoAmI(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(who.Kind, who.AgentID)
	// Output:
	// without a token: unauthorized
	// agent alice
}
