package runners_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/teststore"
)

// pushed is a runner connection's frames, as "type conversation prompt".
type pushed chan string

func (p pushed) push(f []byte) {
	if f == nil {
		p <- "closed"
		return
	}
	var fr struct{ Type, ConversationID, MessageID string }
	_ = json.Unmarshal(f, &fr)
	p <- fr.Type + " " + fr.ConversationID + " " + fr.MessageID
}

// next returns the next frame pushed, failing after 10 s.
func (p pushed) next(t *testing.T) string {
	t.Helper()
	select {
	case f := <-p:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("nothing pushed in 10 s")
		return ""
	}
}

// none checks that nothing more is pushed for a moment.
func (p pushed) none(t *testing.T) {
	t.Helper()
	select {
	case f := <-p:
		t.Fatalf("pushed %q", f)
	case <-time.After(100 * time.Millisecond):
	}
}

// open lets every conversation be worked in.
func open(context.Context, string) error { return nil }

func (b *bundle) conversationOf(t *testing.T, participants ...string) string {
	t.Helper()
	v, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Participants: participants, Members: []string{"human"}, TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	return v.Conversation.ID
}

func (b *bundle) ask(t *testing.T, id, prompt string) {
	t.Helper()
	if _, err := b.eng.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: prompt, Content: "q " + prompt}); err != nil {
		t.Fatal(err)
	}
}

// answer has an agent-wide session answer prompt in conversation id, as
// bot: a message, then complete.
func answer(t *testing.T, ctx context.Context, s *runners.AgentSession, id, prompt string) {
	t.Helper()
	for _, f := range []runners.Frame{
		{Type: "message.create", ConversationID: id, TurnID: "r-" + prompt},
		{Type: "message.part.text-delta", ConversationID: id, TurnID: "r-" + prompt, Delta: "a"},
		{Type: "message.finalize", ConversationID: id, TurnID: "r-" + prompt, Reason: parley.FinishEndTurn},
		{Type: "complete", ConversationID: id, MessageID: prompt},
	} {
		if _, err := s.Apply(ctx, &f); err != nil {
			t.Fatalf("%s in %s: %v", f.Type, id, err)
		}
	}
}

// TestAgentWideRunnerServesItsConversations: an agent-wide runner of bot is
// handed the prompts of the conversations bot takes part in, each frame
// naming its conversation, and none of the others'; prompts waiting when
// it connects are dispatched too; a conversation's own runner of bot goes
// first.
func TestAgentWideRunnerServesItsConversations(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{})
	mine, other, waiting, own := b.conversationOf(t, "bot"), b.conversationOf(t, "someone"), b.conversationOf(t, "bot"), b.conversationOf(t, "bot")
	b.ask(t, waiting, "w1") // before it connects
	p := make(pushed, 16)
	s, detach := b.runners.AttachAgent(conv.Actor{AgentID: "bot"}, p.push, open)
	defer detach()
	if f := p.next(t); f != "prompt "+waiting+" w1" {
		t.Fatalf("the waiting prompt: %q", f)
	}
	answer(t, b.ctx, s, waiting, "w1")
	b.ask(t, other, "o1")
	b.ask(t, mine, "m1")
	if f := p.next(t); f != "prompt "+mine+" m1" {
		t.Fatalf("got %q, want m1 of its own conversation (o1 is not bot's)", f)
	}
	p.none(t)
	ownRunner := make(pushed, 4)
	defer b.runners.Attach(own, "bot", ownRunner.push)()
	b.ask(t, own, "x1")
	if f := ownRunner.next(t); f != "prompt  x1" {
		t.Fatalf("the conversation's own runner got %q", f)
	}
	p.none(t)
	if _, err := s.Apply(b.ctx, &runners.Frame{Type: "message.create", TurnID: "r"}); parley.ErrorCode(err) != parley.EINVALIDVALUE {
		t.Fatalf("a frame that names no conversation: %v", err)
	}
}

// TestAgentWidePromptsSpreadAndFollow: prompts go to the least busy of an
// agent's connections, one answer at a time per conversation; when a
// connection leaves, the prompts it held go to the other.
func TestAgentWidePromptsSpreadAndFollow(t *testing.T) {
	t.Parallel()
	b := setup(t, runners.Options{})
	p1, p2 := make(pushed, 64), make(pushed, 64)
	_, detach1 := b.runners.AttachAgent(conv.Actor{AgentID: "bot"}, p1.push, open)
	s2, detach2 := b.runners.AttachAgent(conv.Actor{AgentID: "bot"}, p2.push, open)
	defer detach2()
	var ids []string
	for i := range 4 {
		id := b.conversationOf(t, "bot")
		ids = append(ids, id)
		b.ask(t, id, fmt.Sprint("a", i))
	}
	got := map[string]string{}
	for range 2 {
		got["1:"+p1.next(t)] = ""
		got["2:"+p2.next(t)] = ""
	}
	if len(got) != 4 {
		t.Fatalf("4 prompts over two idle connections: %v", got)
	}
	// A second prompt in a conversation waits for the first's answer.
	b.ask(t, ids[0], "again")
	p1.none(t)
	p2.none(t)
	// Connection 1 leaves: what it held goes to connection 2.
	detach1()
	moved := map[string]bool{}
	for range 2 {
		moved[p2.next(t)] = true
	}
	for k := range got {
		if k[:2] == "1:" && !moved[k[2:]] {
			t.Fatalf("%q, held by the connection that left, did not move: %v", k[2:], moved)
		}
	}
	// Answering a0 frees its conversation for the next prompt.
	answer(t, b.ctx, s2, ids[0], "a0")
	if f := p2.next(t); f != "prompt "+ids[0]+" again" {
		t.Fatalf("after a0's answer: %q", f)
	}
}

// TestAgentWideRunnerGuidesItsConversationsOnly: an agent-wide runner of
// bot coming and going changes the guidance its conversations' subscribers
// get (a collect prompt waiting out its window names the runner that will
// answer it, then nobody once it left), and looks at no other cached
// conversation: with 2,000 of those cached, its connect and disconnect
// allocate what they do with none (they looked at every one, 4 allocations
// each).
func TestAgentWideRunnerGuidesItsConversationsOnly(t *testing.T) {
	// Not parallel: testing.AllocsPerRun counts the whole process's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := teststore.Open(t)
	eng := engine.New(db, engine.Options{CollectWindow: time.Hour})
	rn := runners.New(eng, db, runners.Options{})
	t.Cleanup(func() { rn.Close(); eng.Close() })
	b := &bundle{eng: eng, runners: rn, ctx: ctx}
	id := b.conversationOf(t, "bot")
	if _, err := eng.EnqueuePrompt(ctx, id, conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "human"}, ID: "p1", Content: "q", Mode: conv.ModeCollect}); err != nil {
		t.Fatal(err)
	}
	sub, err := eng.Subscribe(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if g := sub.Init.Guidance; g == nil || g.NextAgentID != "" {
		t.Fatalf("guidance before a runner came: %+v", g)
	}
	guided := func(want string) {
		t.Helper()
		for it := range sub.C {
			if it.Guidance != nil && it.Guidance.NextAgentID == want {
				return
			}
		}
		t.Fatalf("the subscription ended before guidance named %q: %v", want, sub.Err())
	}
	bot := conv.Actor{AgentID: "bot"}
	_, detach := rn.AttachAgent(bot, silent, open)
	guided("bot")
	detach()
	guided("")

	ghost := conv.Actor{AgentID: "ghost"} // in no conversation
	connect := func() float64 {
		return testing.AllocsPerRun(20, func() {
			_, detach := rn.AttachAgent(ghost, silent, open)
			detach()
		})
	}
	alone := connect()
	for range 2000 {
		if _, err := eng.Conversation(ctx, b.conversationOf(t, "someone")); err != nil { // cached now
			t.Fatal(err)
		}
	}
	if crowded := connect(); crowded > alone+1000 {
		t.Fatalf("an agent-wide runner of an agent in no conversation allocates %.0f times to connect with 2,000 conversations cached, %.0f with none: it looks at each", crowded, alone)
	}
}
