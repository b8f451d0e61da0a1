package engine_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// TestNamesHoldAcrossEngines: an id taken through one engine (a message, a
// prompt withdrawn since) is refused to a write through another engine of
// the same store, whose cached state has not heard of it: the answer does
// not depend on which node was asked, and the message keeps its words.
func TestNamesHoldAcrossEngines(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	other := engine.New(b.db, engine.Options{})
	t.Cleanup(func() { other.Close() })
	id := b.conversation(t, parley.PolicyFree)
	if _, err := other.Conversation(b.ctx, id); err != nil { // cached there before the writes below
		t.Fatal(err)
	}
	alice := conv.Actor{AgentID: "alice"}
	if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: alice, ID: "amsg", Role: parley.RoleUser, Parts: text("alice's words"), Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: alice, ID: "gone", Content: "q", To: "nobody"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.WithdrawPrompt(b.ctx, id, conv.WithdrawPrompt{Actor: alice, ID: "gone"}); err != nil {
		t.Fatal(err)
	}
	bob := conv.Actor{AgentID: "bob"}
	for _, taken := range []string{"amsg", "gone"} {
		_, err := other.EnqueuePrompt(b.ctx, id, conv.EnqueuePrompt{Actor: bob, ID: taken, Content: "bob's words"})
		if parley.ErrorCode(err) != parley.EBUSY {
			t.Fatalf("a prompt under id %s, through the other engine: %v, want busy", taken, err)
		}
		_, err = other.PostMessage(b.ctx, id, conv.PostMessage{Actor: bob, ID: taken, Role: parley.RoleUser, Parts: text("bob's words")})
		if parley.ErrorCode(err) != parley.EBUSY {
			t.Fatalf("a message under id %s, through the other engine: %v, want busy", taken, err)
		}
	}
	m, err := b.db.GetMessage(b.ctx, id, "amsg")
	if err != nil || m.AgentID != "alice" || m.Content != "alice's words" {
		t.Fatalf("alice's message is now %+v (%v)", m, err)
	}
}

// TestImportTakesNames: an import takes the names of what it writes, as
// live writes do: a file with two messages under one id is refused, and
// once imported, its ids are taken for live writes.
func TestImportTakesNames(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	now := time.Now()
	begin := func(id string) *engine.Import {
		t.Helper()
		im, err := b.eng.BeginImport(b.ctx, parley.Conversation{ID: id, Participants: []string{"a", "b"}, TurnPolicy: parley.PolicyFree, CreatedAt: parley.NewTime(now)})
		if err != nil {
			t.Fatal(err)
		}
		return im
	}
	said := func(im *engine.Import, agent, id string, seq int64) (parley.Event, *parley.Message) {
		s := im.State()
		d, err := conv.Decide(s, conv.PostMessage{Actor: conv.Actor{AgentID: agent}, ID: id, Role: parley.RoleAssistant, Parts: text(agent + " says"), Finality: parley.FinalityTurn},
			conv.Env{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		d.Events[0].Seq, d.Messages[0].Seq = seq, seq
		return d.Events[0], d.Messages[0]
	}
	im := begin("twice")
	e1, m1 := said(im, "a", "m1", 2)
	if err := im.Append(b.ctx, []parley.Event{e1}, []*parley.Message{m1}); err != nil {
		t.Fatal(err)
	}
	e2, m2 := said(im, "b", "m1", 3)
	if err := im.Append(b.ctx, []parley.Event{e2}, []*parley.Message{m2}); parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("an import's second message under id m1: %v, want busy", err)
	}
	if err := im.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.GetConversation(b.ctx, "twice"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("the refused import left its conversation: %v", err)
	}

	im = begin("once")
	e1, m1 = said(im, "a", "m1", 2)
	if err := im.Append(b.ctx, []parley.Event{e1}, []*parley.Message{m1}); err != nil {
		t.Fatal(err)
	}
	if err := im.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	_, err := b.eng.EnqueuePrompt(b.ctx, "once", conv.EnqueuePrompt{Actor: conv.Actor{AgentID: "b"}, ID: "m1", Content: "b's words"})
	if parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("a prompt under an imported message's id: %v, want busy", err)
	}
	if taken, err := b.db.IDTaken(b.ctx, "once", "m1"); err != nil || !taken {
		t.Fatalf("IDTaken after the import = %v, %v", taken, err)
	}
}
