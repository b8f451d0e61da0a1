package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/teststore"
)

// bundle is the small setup every engine test starts from: a real store
// and an engine over it.
type bundle struct {
	db  store.Store
	eng *engine.Engine
	ctx context.Context
}

func setup(t *testing.T, opts engine.Options) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	db := openStore(t)
	eng := engine.New(db, opts)
	t.Cleanup(func() { eng.Close() })
	return &bundle{db: db, eng: eng, ctx: ctx}
}

// openStore opens the store the engine tests run on, closed when the test
// ends: a new SQLite file, or with PARLEY_TEST_STORE=postgres a schema of
// its own in PostgreSQL (the test command runs them both ways).
func openStore(t *testing.T) store.Store {
	t.Helper()
	return teststore.Open(t)
}

// testAgents take part in every free conversation these tests make without
// naming participants: only the agents of a conversation may write to it.
var testAgents = []string{"a", "b", "c", "alice", "bob", "bot", "human", "worker", "writer"}

func (b *bundle) conversation(t *testing.T, policy parley.TurnPolicy, participants ...string) string {
	t.Helper()
	if len(participants) == 0 && policy == parley.PolicyFree {
		participants = testAgents
	}
	v, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Participants: participants, TurnPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return v.Conversation.ID
}

func text(s string) []parley.Part { return []parley.Part{{Type: parley.PartText, Text: s}} }

func (b *bundle) say(t *testing.T, id, agent, content string, fin parley.Finality) *engine.MessageResult {
	t.Helper()
	r, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: agent}, Role: parley.RoleAssistant, Parts: text(content), Finality: fin})
	if err != nil {
		t.Fatalf("%s says %q: %v", agent, content, err)
	}
	return r
}

func (b *bundle) events(t *testing.T, id string) []parley.Event {
	t.Helper()
	es, err := b.db.ReadEvents(b.ctx, store.ReadEventsParams{ConversationID: id, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestPostMessageIsStoredWithItsProjection(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyRoundRobin, "alice", "bob")
	r := b.say(t, id, "alice", "hello", parley.FinalityTurn)
	if r.Seq != 2 || r.Turn != 1 || r.Message.Content != "hello" || r.Message.TurnID != r.Message.ID {
		t.Fatalf("result = seq %d turn %d content %q turnId %q", r.Seq, r.Turn, r.Message.Content, r.Message.TurnID)
	}
	m, err := b.db.GetMessage(b.ctx, id, r.Message.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Seq != 2 || m.Finality != parley.FinalityTurn || m.AgentID != "alice" {
		t.Fatalf("stored message = %+v", m)
	}
	v, err := b.eng.Conversation(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Head.LastSeq != 2 || v.Head.LastTurn != 1 || v.Head.OpenTurn != nil {
		t.Fatalf("head = %+v", v.Head)
	}
	if g := v.Guidance; g == nil || g.NextAgentID != "bob" || g.Turn != 2 || g.AfterSeq != 2 {
		t.Fatalf("guidance = %+v, want bob for turn 2 after seq 2", g)
	}
	if _, err := b.eng.Conversation(b.ctx, "nope"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("unknown conversation: err = %v, want not_found", err)
	}
}

func TestReplyLooksUpParentAndRefusesOtherConversations(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree)
	other := b.conversation(t, parley.PolicyFree)
	q, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "human"}, Role: parley.RoleUser, Parts: text("q"), Finality: parley.FinalityTurn})
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "bot"}, Role: parley.RoleAssistant, Parts: text("a"), ReplyTo: q.Message.ID})
	if err != nil {
		t.Fatal(err)
	}
	if a.Message.TurnID != q.Message.ID || a.Message.Depth != 1 || a.Turn != 2 {
		t.Fatalf("reply: turnId %q depth %d turn %d; want turnId %q depth 1 turn 2", a.Message.TurnID, a.Message.Depth, a.Turn, q.Message.ID)
	}
	_, err = b.eng.PostMessage(b.ctx, other, conv.PostMessage{Actor: conv.Actor{AgentID: "bot"}, Role: parley.RoleAssistant, Parts: text("x"), ReplyTo: q.Message.ID})
	if parley.ErrorCode(err) != parley.EINVALIDTHREAD {
		t.Fatalf("reply across conversations: err = %v, want invalid_thread", err)
	}
	if n := len(b.events(t, other)); n != 1 {
		t.Fatalf("refused write left %d events, want 1", n)
	}
	_, err = b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "bot"}, ID: q.Message.ID, Role: parley.RoleAssistant, Parts: text("dup")})
	if parley.ErrorCode(err) != parley.EBUSY {
		t.Fatalf("duplicate id: err = %v, want busy", err)
	}
}

func TestIdempotentRetryReturnsOriginalResult(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree)
	post := func(hash string) (*engine.MessageResult, error) {
		return b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "a"}, Role: parley.RoleAssistant, Parts: text("once"), Finality: parley.FinalityTurn, ClientRequestID: "req-1", RequestHash: hash})
	}
	first, err := post("h1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := post("h1")
	if err != nil {
		t.Fatalf("retry after the turn closed: %v", err)
	}
	if !again.Replayed || again.Seq != first.Seq || again.Message.ID != first.Message.ID {
		t.Fatalf("retry = %+v, want the original (seq %d, id %s)", again, first.Seq, first.Message.ID)
	}
	if _, err := post("h2"); parley.ErrorCode(err) != parley.EIDEMPOTENCY {
		t.Fatalf("other body under the same key: err = %v, want idempotency_mismatch", err)
	}
	if n := len(b.events(t, id)); n != 2 {
		t.Fatalf("log has %d events, want 2 (created + one message)", n)
	}
}

func TestConcurrentWritersKeepSeqDense(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	ids := []string{b.conversation(t, parley.PolicyFree), b.conversation(t, parley.PolicyFree), b.conversation(t, parley.PolicyFree)}
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := ids[(w+i)%len(ids)]
				if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: fmt.Sprintf("w%d", w), Admin: true}, Role: parley.RoleAssistant, Parts: text("x"), Finality: parley.FinalityTurn}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	total := 0
	for _, id := range ids {
		es := b.events(t, id)
		for i, e := range es {
			if e.Seq != int64(i+1) {
				t.Fatalf("conversation %s: event %d has seq %d", id, i, e.Seq)
			}
		}
		total += len(es) - 1
	}
	if total != 12*25 {
		t.Fatalf("%d messages stored, want %d", total, 12*25)
	}
}

// TestTwoEnginesOnOneStoreResolveConflicts plays two nodes: each engine has
// its own cached state; a stale writer meets ECONFLICT, reloads and decides again.
func TestTwoEnginesOnOneStoreResolveConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	other := engine.New(b.db, engine.Options{})
	defer other.Close()
	id := b.conversation(t, parley.PolicyFree)
	if _, err := other.Conversation(b.ctx, id); err != nil { // other caches seq 1
		t.Fatal(err)
	}
	b.say(t, id, "alice", "first", parley.FinalityNone) // turn 1 open, owned by alice
	_, err := other.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "bob"}, Role: parley.RoleAssistant, Parts: text("second")})
	if parley.ErrorCode(err) != parley.ETURNCONFLICT {
		t.Fatalf("stale engine: err = %v, want turn_conflict after reloading", err)
	}
	r, err := other.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "alice"}, Role: parley.RoleAssistant, Parts: text("third")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 3 || r.Turn != 1 {
		t.Fatalf("continued on the other engine: seq %d turn %d, want 3 and 1", r.Seq, r.Turn)
	}
}

func TestClaimExpiresByItself(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyRoundRobin, "alice", "bob")
	sub, err := b.eng.Subscribe(b.ctx, id, &parley.Position{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := b.eng.Claim(b.ctx, id, conv.ClaimTurn{Actor: conv.Actor{AgentID: "bob"}, TTL: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var types []string
	for it := range sub.C {
		if it.Event != nil {
			types = append(types, it.Event.Type)
			if it.Event.Type == parley.EventClaimExpired {
				break
			}
		}
	}
	if len(types) != 2 || types[0] != parley.EventTurnClaimed {
		t.Fatalf("events = %v, want turn.claimed then claim.expired", types)
	}
	v, err := b.eng.Conversation(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Head.Claim != nil || v.Guidance.NextAgentID != "alice" {
		t.Fatalf("after expiry: claim %+v, guidance %+v", v.Head.Claim, v.Guidance)
	}
}

func TestClosedEngineRefusesWork(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree)
	b.eng.Close()
	if _, err := b.eng.Subscribe(b.ctx, id, nil); parley.ErrorCode(err) != parley.EUNAVAILABLE {
		t.Fatalf("subscribe after close: %v, want unavailable", err)
	}
	if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: conv.Actor{AgentID: "a"}, Role: parley.RoleAssistant, Parts: text("late")}); parley.ErrorCode(err) != parley.EUNAVAILABLE {
		t.Fatalf("write after close: %v, want unavailable", err)
	}
}

// TestConcurrentClaimsOneWins races many agents for the next turn through
// the engine: exactly one claim is granted, every other gets claim_conflict.
func TestConcurrentClaimsOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	for round := 0; round < 20; round++ {
		const n = 8
		agents := make([]string, n)
		for i := range agents {
			agents[i] = fmt.Sprintf("agent-%d", i)
		}
		id := b.conversation(t, parley.PolicyFree, agents...)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := b.eng.Claim(b.ctx, id, conv.ClaimTurn{Actor: conv.Actor{AgentID: fmt.Sprintf("agent-%d", i)}, TTL: time.Minute})
				errs <- err
			}(i)
		}
		wg.Wait()
		close(errs)
		won := 0
		for err := range errs {
			switch parley.ErrorCode(err) {
			case "":
				won++
			case parley.ECLAIMCONFLICT:
				var pe *parley.Error
				if !errors.As(err, &pe) || pe.Head == nil || pe.Head.Claim == nil {
					t.Fatalf("a losing claim carries no head with the winning claim: %v", err)
				}
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d claims won, want exactly 1", round, won)
		}
		if n := len(b.events(t, id)); n != 2 {
			t.Fatalf("round %d: %d events, want created + one turn.claimed", round, n)
		}
	}
}
