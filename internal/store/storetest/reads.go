package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

func ids(ms []*parley.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func wantIDs(t *testing.T, what string, ms []*parley.Message, want ...string) {
	t.Helper()
	got := ids(ms)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func testListMessages(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	a1, b1, a2, b2 := message(id, "a1", 0, "", 0), message(id, "b1", 0, "", 0), message(id, "a2", 0, "", 0), message(id, "b2", 0, "", 0)
	b1.AgentID, b2.AgentID = "b", "b"
	a2.TurnID, b2.TurnID = "shared", "shared"
	b2.ReplyTo, b2.Depth = "a2", 1
	appendMessages(t, s, id, 1, a1, b1, a2, b2)
	list := func(p store.ListMessagesParams) []*parley.Message {
		p.ConversationID = id
		ms, err := s.ListMessages(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		// The raw rows are the same rows, stored as EncodeRow writes them:
		// their JSON as clients read it is the messages'.
		raw, err := s.ListMessagesRaw(ctx(t), p)
		if err != nil || len(raw) != len(ms) {
			t.Fatalf("ListMessagesRaw: %d rows, %v; ListMessages: %d", len(raw), err, len(ms))
		}
		for i, r := range raw {
			want, _ := json.Marshal(ms[i])
			stored, _ := store.EncodeRow(ms[i])
			wire, err := store.WireRow(r.Data)
			if r.Seq != ms[i].Seq || string(r.Data) != string(stored) || string(wire) != string(want) || err != nil {
				t.Fatalf("raw row %d = seq %d %s (%s, %v), want seq %d %s", i, r.Seq, r.Data, wire, err, ms[i].Seq, want)
			}
		}
		// So are the keys, each the message's.
		keys, err := s.ListMessageKeys(ctx(t), p)
		if err != nil || len(keys) != len(ms) {
			t.Fatalf("ListMessageKeys: %d keys, %v; ListMessages: %d", len(keys), err, len(ms))
		}
		for i, k := range keys {
			if want := keyOf(ms[i]); k != want {
				t.Fatalf("key %d = %+v, want %+v", i, k, want)
			}
		}
		return ms
	}
	for _, m := range []*parley.Message{a1, b2} {
		if k, err := s.MessageKey(ctx(t), id, m.ID); err != nil || *k != keyOf(m) {
			t.Fatalf("the key of %s: %+v, %v; want %+v", m.ID, k, err, keyOf(m))
		}
	}
	_, err := s.MessageKey(ctx(t), id, "nope")
	wantCode(t, err, parley.ENOTFOUND)
	wantIDs(t, "all", list(store.ListMessagesParams{Limit: 10}), "a1", "b1", "a2", "b2")
	wantIDs(t, "after 3, limit 1", list(store.ListMessagesParams{After: 3, Limit: 1}), "a2")
	wantIDs(t, "agent b", list(store.ListMessagesParams{AgentID: "b", Limit: 10}), "b1", "b2")
	wantIDs(t, "turnId shared", list(store.ListMessagesParams{TurnID: "shared", Limit: 10}), "a2", "b2")
	wantIDs(t, "turnId shared, agent a", list(store.ListMessagesParams{TurnID: "shared", AgentID: "a", Limit: 10}), "a2")
	wantIDs(t, "latest 2", list(store.ListMessagesParams{Latest: true, Limit: 2}), "a2", "b2")
	wantIDs(t, "latest 2 before b2", list(store.ListMessagesParams{Latest: true, Limit: 2, Before: b2.Seq}), "b1", "a2")
	wantIDs(t, "before a2", list(store.ListMessagesParams{Limit: 10, Before: a2.Seq}), "a1", "b1")
	_, err = s.GetMessage(ctx(t), uuid.NewString(), "a1")
	wantCode(t, err, parley.ENOTFOUND)
}

// keyOf is the key the store keeps of m.
func keyOf(m *parley.Message) store.MessageKey {
	return store.MessageKey{ID: m.ID, Seq: m.Seq, TurnID: m.TurnID, AgentID: m.AgentID, ReplyTo: m.ReplyTo, Depth: m.Depth}
}

// testThreads builds root ← c1 ← c2 ← c3 and root ← f1, root ← f2 (fan-out).
func testThreads(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	last := appendMessages(t, s, id, 1,
		message(id, "root", 0, "", 0), message(id, "c1", 0, "root", 1), message(id, "f1", 0, "root", 1),
		message(id, "c2", 0, "c1", 2), message(id, "f2", 0, "root", 1), message(id, "c3", 0, "c2", 3))
	replies, err := s.ListReplies(ctx(t), store.ListRepliesParams{ConversationID: id, MessageID: "root", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "replies to root", replies, "c1", "f1", "f2")
	replies, _ = s.ListReplies(ctx(t), store.ListRepliesParams{ConversationID: id, MessageID: "root", After: replies[0].Seq, Limit: 1})
	wantIDs(t, "replies to root after c1, limit 1", replies, "f1")

	anc, err := s.Ancestors(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "c3"})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "ancestors of c3", anc, "root", "c1", "c2")
	anc, _ = s.Ancestors(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "c3", Limit: 2})
	wantIDs(t, "the nearest 2 ancestors of c3", anc, "c1", "c2")
	anc, _ = s.Ancestors(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "root"})
	wantIDs(t, "ancestors of root", anc)
	_, err = s.Ancestors(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "nope"})
	wantCode(t, err, parley.ENOTFOUND)

	desc, err := s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "root", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "descendants of root", desc, "c1", "f1", "c2", "f2", "c3")
	desc, _ = s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "root", Limit: 2})
	wantIDs(t, "descendants of root, limit 2", desc, "c1", "f1")
	desc, _ = s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "root", After: desc[1].Seq, Limit: 2})
	wantIDs(t, "descendants of root after f1, limit 2", desc, "c2", "f2")
	desc, _ = s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "c2", Limit: 10})
	wantIDs(t, "descendants of c2", desc, "c3")
	_, err = s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "nope", Limit: 10})
	wantCode(t, err, parley.ENOTFOUND)
	// A reply to a message the conversation does not hold (legacy data)
	// is listed.
	appendMessages(t, s, id, last, message(id, "orphan", 0, "lost", 1))
	replies, err = s.ListReplies(ctx(t), store.ListRepliesParams{ConversationID: id, MessageID: "lost", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "replies to a message not held", replies, "orphan")

	// Another conversation's messages with the same ids are not part of this thread.
	other := newConversation(t, s)
	appendMessages(t, s, other, 1, message(other, "c4", 0, "c3", 4))
	desc, _ = s.Descendants(ctx(t), store.ThreadParams{ConversationID: id, MessageID: "c3", Limit: 10})
	wantIDs(t, "descendants of c3 (other conversation holds a reply)", desc)
}

func testIdempotency(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	_, err := s.GetIdempotency(ctx(t), id, "a", "k")
	wantCode(t, err, parley.ENOTFOUND)
	key := &store.Idempotency{ConversationID: id, AgentID: "a", Key: "k", RequestHash: "hash", Seq: 2, Response: []byte(`{"ok":1}`), Time: t0}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Idempotency: key, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetIdempotency(ctx(t), id, "a", "k")
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestHash != "hash" || got.Seq != 2 || string(got.Response) != `{"ok":1}` || !got.Time.Equal(t0.Time) {
		t.Fatalf("idempotency record = %+v", got)
	}
	_, err = s.GetIdempotency(ctx(t), id, "b", "k") // keys are per agent
	wantCode(t, err, parley.ENOTFOUND)
}

func testTokens(t *testing.T, s store.Store) {
	before, err := s.CountTokens(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	tok := &parley.Token{ID: uuid.NewString(), Kind: parley.TokenAgent, AgentID: "alice", Name: "n", Hash: uuid.NewString(), CreatedAt: t0}
	if err := s.CreateToken(ctx(t), tok); err != nil {
		t.Fatal(err)
	}
	dup := *tok
	dup.ID = uuid.NewString()
	wantCode(t, s.CreateToken(ctx(t), &dup), parley.EBUSY)
	got, err := s.TokenByHash(ctx(t), tok.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || got.Kind != parley.TokenAgent || got.AgentID != "alice" || got.Name != "n" || !got.RevokedAt.IsZero() {
		t.Fatalf("token = %+v", got)
	}
	if n, _ := s.CountTokens(ctx(t)); n != before+1 {
		t.Fatalf("count %d, want %d", n, before+1)
	}
	all, err := s.ListTokens(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range all {
		found = found || x.ID == tok.ID
	}
	if !found {
		t.Fatal("ListTokens misses the new token")
	}
	if err := s.RevokeToken(ctx(t), tok.ID, t0); err != nil {
		t.Fatal(err)
	}
	got, _ = s.TokenByHash(ctx(t), tok.Hash)
	if got.RevokedAt.IsZero() {
		t.Fatal("revoked token has no revokedAt")
	}
	if n, _ := s.CountTokens(ctx(t)); n != before {
		t.Fatalf("count %d after revoke, want %d", n, before)
	}
	wantCode(t, s.RevokeToken(ctx(t), uuid.NewString(), t0), parley.ENOTFOUND)
	_, err = s.TokenByHash(ctx(t), uuid.NewString())
	wantCode(t, err, parley.ENOTFOUND)
}

func testConcurrentMany(t *testing.T, s store.Store) {
	convs := make([]string, 20)
	for i := range convs {
		convs[i] = newConversation(t, s)
	}
	var wg sync.WaitGroup
	for _, id := range convs {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			for seq := int64(1); seq < 21; seq++ {
				if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: seq, Events: []parley.Event{event(id, seq+1, "a")}, State: []byte(`{}`)}); err != nil {
					t.Error(err)
					return
				}
			}
		}(id)
	}
	wg.Wait()
	for _, id := range convs {
		events, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 100})
		for i, e := range events {
			if e.Seq != int64(i+1) {
				t.Fatalf("conversation %s: event %d has seq %d", id, i, e.Seq)
			}
		}
		if len(events) != 21 {
			t.Fatalf("conversation %s has %d events, want 21", id, len(events))
		}
	}
}

func testConcurrentOne(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	const writers = 10
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, fmt.Sprint(w))}, State: []byte(`{}`)})
		}(w)
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch parley.ErrorCode(err) {
		case "":
			won++
		case parley.ECONFLICT:
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won the same seq, want exactly 1", won)
	}
}

// testBadAppendsAmongMany makes appends of many conversations at once, as
// a store that commits them in groups takes them together, with a stale
// one and one reusing an idempotency key among them: each is answered as
// if it were alone (ECONFLICT, EBUSY, or written), and a bad one writes
// nothing and keeps none of the others from being written.
func testBadAppendsAmongMany(t *testing.T, s store.Store) {
	const n = 48
	convs := make([]string, n)
	for i := range convs {
		convs[i] = newConversation(t, s)
		// Every conversation has used key "used" once (seq 2).
		key := &store.Idempotency{ConversationID: convs[i], AgentID: "a", Key: "used", RequestHash: "h", Seq: 2, Response: []byte(`{}`), Time: t0}
		if err := s.Append(ctx(t), store.AppendParams{ConversationID: convs[i], ExpectSeq: 1, Events: []parley.Event{event(convs[i], 2, "a")}, Idempotency: key, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for round := int64(0); round < 5; round++ {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, id := range convs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := store.AppendParams{ConversationID: id, ExpectSeq: 2 + round, State: []byte(`{}`)}
				switch i % 6 {
				case 1: // stale: it read the conversation a write ago
					p.ExpectSeq = 1
				case 4: // a request id this agent used before
					p.ExpectSeq = 2
					p.Idempotency = &store.Idempotency{ConversationID: id, AgentID: "a", Key: "used", RequestHash: "h2", Seq: p.ExpectSeq + 1, Response: []byte(`{}`), Time: t0}
				}
				p.Events = []parley.Event{event(id, p.ExpectSeq+1, "a")}
				p.Messages = []*parley.Message{message(id, fmt.Sprintf("m%d", round), p.ExpectSeq+1, "", 0)}
				errs[i] = s.Append(ctx(t), p)
			}()
		}
		wg.Wait()
		for i := range convs {
			want := ""
			switch i % 6 {
			case 1:
				want = parley.ECONFLICT
			case 4:
				want = parley.EBUSY
			}
			if got := parley.ErrorCode(errs[i]); got != want {
				t.Fatalf("round %d, conversation %d: err = %v, want code %q", round, i, errs[i], want)
			}
		}
	}
	for i, id := range convs {
		wantSeq, wantMsgs := int64(7), 5 // written every round
		if i%6 == 1 || i%6 == 4 {
			wantSeq, wantMsgs = 2, 0 // never written
		}
		events, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 100})
		if err != nil || int64(len(events)) != wantSeq {
			t.Fatalf("conversation %d has %d events (%v), want %d", i, len(events), err, wantSeq)
		}
		for j, e := range events {
			if e.Seq != int64(j+1) {
				t.Fatalf("conversation %d: event %d has seq %d", i, j, e.Seq)
			}
		}
		ms, err := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 100})
		if err != nil || len(ms) != wantMsgs {
			t.Fatalf("conversation %d has %d message rows (%v), want %d", i, len(ms), err, wantMsgs)
		}
	}
}

// testExclusive: while an Exclusive's fn runs, an append to its
// conversation waits; fn's own append commits with it and the waiting one,
// made on the old head, is then refused; a failing fn writes nothing.
func testExclusive(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	wantCode(t, s.Exclusive(ctx(t), "no-such-conversation", func(func(store.AppendParams) error) error { return nil }), parley.ENOTFOUND)

	other := make(chan error, 1)
	err := s.Exclusive(ctx(t), id, func(write func(store.AppendParams) error) error {
		go func() {
			other <- s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "b")}, State: []byte(`{}`)})
		}()
		select {
		case err := <-other:
			return fmt.Errorf("an append went in while the conversation was held: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if err := write(store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, State: []byte(`{}`)}); err != nil {
			return err
		}
		wantCode(t, write(store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "a")}, State: []byte(`{}`)}), parley.EINTERNAL)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-other, parley.ECONFLICT)

	failed := fmt.Errorf("changed my mind")
	err = s.Exclusive(ctx(t), id, func(write func(store.AppendParams) error) error {
		if err := write(store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "a")}, State: []byte(`{}`)}); err != nil {
			return err
		}
		return failed
	})
	if err != failed {
		t.Fatalf("Exclusive returned %v, want fn's error", err)
	}
	events, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 10})
	if err != nil || len(events) != 2 || events[1].AgentID != "a" {
		t.Fatalf("after the exclusive writes: %d events (%v), want 2, the second a's", len(events), err)
	}
}
