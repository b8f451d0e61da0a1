package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// wantStored checks a conversation's head, state and queue as read back by
// GetConversation and by ListConversations.
func wantStored(t *testing.T, s store.Store, id string, lastSeq int64, state, queue string, hasQueue bool) {
	t.Helper()
	rec, err := s.GetConversation(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	listed := listed(t, s, id)
	for name, r := range map[string]*store.ConversationRecord{"GetConversation": rec, "ListConversations": listed} {
		if r == nil || r.LastSeq != lastSeq || string(r.State) != state || string(r.Queue) != queue || (r.Queue != nil) != hasQueue {
			t.Fatalf("%s: %+v, want lastSeq %d state %s queue %s (set %v)", name, r, lastSeq, state, queue, hasQueue)
		}
	}
}

// listed returns the record ListConversations gives for id, or nil.
func listed(t *testing.T, s store.Store, id string) *store.ConversationRecord {
	t.Helper()
	for cursor := ""; ; {
		recs, next, err := s.ListConversations(ctx(t), store.ListConversationsParams{Cursor: cursor, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Conversation.ID == id {
				return r
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// testQueueKeptApart: the prompt queue is written only by the appends that
// give one, and read back beside the state by GetConversation and
// ListConversations; an append without one leaves it as it was; a refused
// append leaves it too; removing a conversation (a delete, an aborted
// import) removes its queue.
func testQueueKeptApart(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	wantStored(t, s, id, 1, `{"v":1}`, "", false)
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")},
		State: []byte(`{"s":2}`), Queue: []byte(`[{"id":"p1"}]`)}); err != nil {
		t.Fatal(err)
	}
	wantStored(t, s, id, 2, `{"s":2}`, `[{"id":"p1"}]`, true)
	last := appendMessages(t, s, id, 2, message(id, "m1", 0, "", 0)) // state {}, no queue
	wantStored(t, s, id, last, `{}`, `[{"id":"p1"}]`, true)

	// Refused appends leave the queue: a lost race, a taken idempotency key.
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "x")},
		State: []byte(`{"stale":1}`), Queue: []byte(`["stale"]`)})
	wantCode(t, err, parley.ECONFLICT)
	key := &store.Idempotency{ConversationID: id, AgentID: "a", Key: "k", RequestHash: "h", Seq: last + 1, Response: []byte(`{}`), Time: t0}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")},
		Idempotency: key, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	last++
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")},
		Idempotency: key, State: []byte(`{"ghost":1}`), Queue: []byte(`["ghost"]`)})
	wantCode(t, err, parley.EBUSY)
	wantStored(t, s, id, last, `{}`, `[{"id":"p1"}]`, true)

	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")},
		State: []byte(`{"s":5}`), Queue: []byte(`[]`)}); err != nil {
		t.Fatal(err)
	}
	wantStored(t, s, id, last+1, `{"s":5}`, `[]`, true)

	// A conversation created with a queue, deleted, and made again without.
	c := parley.Conversation{ID: uuid.NewString(), Epoch: "ep", TurnPolicy: parley.PolicyFree, CreatedAt: t0}
	create := func(queue []byte, im *store.ImportLease) {
		t.Helper()
		if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(c.ID, 1, "")},
			State: []byte(`{"v":1}`), Queue: queue, Import: im}); err != nil {
			t.Fatal(err)
		}
	}
	create([]byte(`["first"]`), nil)
	wantStored(t, s, c.ID, 1, `{"v":1}`, `["first"]`, true)
	if err := s.DeleteConversation(ctx(t), c.ID); err != nil {
		t.Fatal(err)
	}
	create(nil, nil)
	wantStored(t, s, c.ID, 1, `{"v":1}`, "", false)

	// An import that wrote a queue and was aborted leaves none behind.
	c.ID = uuid.NewString()
	owner := uuid.NewString()
	create(nil, lease(owner, time.Hour))
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: c.ID, ExpectSeq: 1, Events: []parley.Event{event(c.ID, 2, "a")},
		State: []byte(`{}`), Queue: []byte(`["imported"]`), Import: lease(owner, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortImport(ctx(t), c.ID, owner); err != nil {
		t.Fatal(err)
	}
	create(nil, nil)
	wantStored(t, s, c.ID, 1, `{"v":1}`, "", false)
}

// testTaskOnlyAppend: an append with no events that advances a task (a
// firing skipped because the prompt queue is full) moves the task on and
// keeps the log and its head, or, on a lost race, does nothing.
func testTaskOnlyAppend(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	task := &parley.Task{ID: uuid.NewString(), ConversationID: id, AgentID: "a", Prompt: "p", EveryMs: 60000, NextRunAt: t0, CreatedAt: t0}
	if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task}); err != nil {
		t.Fatal(err)
	}
	next := parley.NewTime(t0.Add(time.Minute))
	adv := &parley.TaskAdvance{TaskID: task.ID, From: t0, To: next}
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 0, Task: adv, State: []byte(`{"stale":1}`)})
	wantCode(t, err, parley.ECONFLICT)
	if got, _ := s.GetTask(ctx(t), task.ID); !got.NextRunAt.Equal(t0.Time) {
		t.Fatalf("a refused append moved the task to %v", got.NextRunAt)
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Task: adv, State: []byte(`{"s":1}`)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetTask(ctx(t), task.ID); !got.NextRunAt.Equal(next.Time) {
		t.Fatalf("next run %v, want %v", got.NextRunAt, next)
	}
	wantStored(t, s, id, 1, `{"s":1}`, "", false)
	if events, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 10}); len(events) != 1 {
		t.Fatalf("%d events after an append of none, want 1", len(events))
	}
}

// testNilStateKeepsSnapshot: an append without a state snapshot moves the
// conversation's last seq and leaves the stored snapshot as it was.
func testNilStateKeepsSnapshot(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}}); err != nil {
		t.Fatal(err)
	}
	wantStored(t, s, id, 2, `{"v":1}`, "", false)
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "a")}, State: []byte(`{"v":3}`)}); err != nil {
		t.Fatal(err)
	}
	wantStored(t, s, id, 3, `{"v":3}`, "", false)
}
