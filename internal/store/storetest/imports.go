package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// lease returns a lease of owner that ends d after t0.
func lease(owner string, d time.Duration) *store.ImportLease {
	return &store.ImportLease{Owner: owner, Expires: parley.NewTime(t0.Add(d))}
}

// newImport creates a conversation as an import in progress of owner, with
// one appended batch (a message at seq 2), and returns its id.
func newImport(t *testing.T, s store.Store, owner string, d time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	c := parley.Conversation{ID: id, Epoch: "ep", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, CreatedAt: t0}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(id, 1, "")},
		State: []byte(`{"v":1}`), Import: lease(owner, d)}); err != nil {
		t.Fatal(err)
	}
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")},
		Messages: []*parley.Message{message(id, "m1", 2, "", 0)}, State: []byte(`{"v":2}`), Import: lease(owner, d)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// visible reports whether readers see a conversation: by id, and listed.
func visible(t *testing.T, s store.Store, id string) (got, listed bool) {
	t.Helper()
	_, err := s.GetConversation(ctx(t), id)
	if err != nil && parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatal(err)
	}
	got = err == nil
	for cursor := ""; ; {
		recs, next, err := s.ListConversations(ctx(t), store.ListConversationsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(recs, func(r *store.ConversationRecord) bool { return r.Conversation.ID == id }) {
			listed = true
		}
		if next == "" {
			return got, listed
		}
		cursor = next
	}
}

// rowsOf counts what a conversation has left in the log and the messages.
func rowsOf(t *testing.T, s store.Store, id string) int {
	t.Helper()
	evs, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs) + len(ms)
}

// testImportInvisibleUntilFinished: an import in progress is seen by no
// reader and taken by no other writer; its importer appends to it and
// renews it; once finished it is an ordinary conversation.
func testImportInvisibleUntilFinished(t *testing.T, s store.Store) {
	owner := uuid.NewString()
	id := newImport(t, s, owner, time.Hour)
	if got, listed := visible(t, s, id); got || listed {
		t.Fatalf("an import in progress is visible: get %v, listed %v", got, listed)
	}
	_, err := s.Head(ctx(t), id)
	wantCode(t, err, parley.ENOTFOUND)
	if n := rowsOf(t, s, id); n != 3 {
		t.Fatalf("the import holds %d events and rows, want 3 (its importer reads them)", n)
	}
	// Nobody else writes into it, nor takes its id.
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "x")}, State: []byte(`{}`)})
	wantCode(t, err, parley.ENOTFOUND)
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "x")}, State: []byte(`{}`), Import: lease("other", time.Hour)})
	wantCode(t, err, parley.EBUSY)
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "x")}, State: []byte(`{}`), Import: lease("", time.Hour)})
	wantCode(t, err, parley.EINVALID)
	err = s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: parley.Conversation{ID: id, Epoch: "e2", CreatedAt: t0},
		Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)})
	wantCode(t, err, parley.EBUSY)
	if !strings.Contains(parley.ErrorMessage(err), "import") {
		t.Fatalf("taking the id of an import in progress: %v; the message should say an import is in progress", err)
	}
	wantCode(t, s.RenewImport(ctx(t), store.RenewImportParams{ConversationID: id, Lease: *lease("other", time.Hour)}), parley.EBUSY)
	wantCode(t, s.FinishImport(ctx(t), id, "other"), parley.EBUSY)
	// Its importer goes on: a stale seq is still a conflict.
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, State: []byte(`{}`), Import: lease(owner, time.Hour)})
	wantCode(t, err, parley.ECONFLICT)
	if err := s.RenewImport(ctx(t), store.RenewImportParams{ConversationID: id, Lease: *lease(owner, 2*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	last := appendImport(t, s, id, owner, 2)

	if err := s.FinishImport(ctx(t), id, owner); err != nil {
		t.Fatal(err)
	}
	if got, listed := visible(t, s, id); !got || !listed {
		t.Fatalf("a finished import is not visible: get %v, listed %v", got, listed)
	}
	rec, err := s.GetConversation(ctx(t), id)
	if err != nil || rec.LastSeq != last || string(rec.State) != `{"v":3}` {
		t.Fatalf("the finished import: %+v, %v", rec, err)
	}
	// It is an ordinary conversation now: its importer is done with it.
	wantCode(t, s.FinishImport(ctx(t), id, owner), parley.EBUSY)
	err = s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")}, State: []byte(`{}`), Import: lease(owner, time.Hour)})
	wantCode(t, err, parley.EBUSY)
	wantCode(t, s.AbortImport(ctx(t), id, owner), parley.ENOTFOUND)
	appendMessages(t, s, id, last, message(id, "after", 0, "", 0))
	// Sweeping never touches it.
	if removed, err := s.SweepImports(ctx(t), store.SweepImportsParams{Owner: "other", Now: parley.NewTime(t0.Add(48 * time.Hour)), ConversationID: id}); err != nil || len(removed) != 0 {
		t.Fatalf("a sweep removed a finished import: %v, %v", removed, err)
	}
}

// appendImport appends one batch of the import of owner after seq after
// and returns the new last seq.
func appendImport(t *testing.T, s store.Store, id, owner string, after int64) int64 {
	t.Helper()
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: after, Events: []parley.Event{event(id, after+1, "a")},
		State: []byte(`{"v":3}`), Import: lease(owner, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return after + 1
}

// testImportWritesRowAgain: an import may write an ended message's row
// again (a legacy import merges a later copy of the message into it) with
// a message.updated that leaves the row's seqs as they were. The event
// that first wrote the row reads as written, before and after the import
// is done, and after a compaction past the retention.
func testImportWritesRowAgain(t *testing.T, s store.Store) {
	owner := uuid.NewString()
	id := newImport(t, s, owner, time.Hour)
	m := said(id, "copied", "a", "said once, seen twice", t0)
	m.Seq = 3
	first, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	posted := parley.Event{ConversationID: id, Seq: 3, Type: parley.EventMessage, Turn: 1, TurnID: "t", AgentID: "a", Finality: parley.FinalityNone, Time: t0, Data: first}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{posted},
		Messages: []*parley.Message{m}, State: []byte(`{}`), Import: lease(owner, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	again := *m
	again.Metadata = json.RawMessage(`{"seenBy":["b"]}`)
	second, err := json.Marshal(&again)
	if err != nil {
		t.Fatal(err)
	}
	updated := parley.Event{ConversationID: id, Seq: 4, Type: parley.EventMessageUpdated, Turn: 1, TurnID: "t", AgentID: "a", Finality: parley.FinalityNone, Time: t0, Data: second}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 3, Events: []parley.Event{updated},
		Messages: []*parley.Message{&again}, State: []byte(`{}`), Import: lease(owner, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishImport(ctx(t), id, owner); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		evs, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, After: 2, Limit: 10})
		var got []string
		for _, e := range evs {
			got = append(got, string(e.Data))
		}
		if err != nil || !slices.Equal(got, []string{string(first), string(second)}) {
			t.Fatalf("%s: the log reads %q (%v), want the message as first written, then as written again", when, got, err)
		}
	}
	check("the import done")
	compact(t, s, id, t0.Add(48*time.Hour), 24*time.Hour, 0)
	check("compacted")
}

// testAbortImport: an aborted import leaves nothing, and its id is free.
func testAbortImport(t *testing.T, s store.Store) {
	owner := uuid.NewString()
	id := newImport(t, s, owner, time.Hour)
	wantCode(t, s.AbortImport(ctx(t), id, "other"), parley.ENOTFOUND)
	if n := rowsOf(t, s, id); n != 3 {
		t.Fatalf("another owner's abort removed rows: %d left of 3", n)
	}
	if err := s.AbortImport(ctx(t), id, owner); err != nil {
		t.Fatal(err)
	}
	if n := rowsOf(t, s, id); n != 0 {
		t.Fatalf("%d events and rows of an aborted import remain", n)
	}
	wantCode(t, s.AbortImport(ctx(t), id, owner), parley.ENOTFOUND)
	wantCode(t, s.FinishImport(ctx(t), id, owner), parley.EBUSY)
	// The id is free for a new import.
	appendImport(t, s, newImportWithID(t, s, id, owner), owner, 2)
	if err := s.AbortImport(ctx(t), id, owner); err != nil {
		t.Fatal(err)
	}
}

// newImportWithID is newImport under a given id.
func newImportWithID(t *testing.T, s store.Store, id, owner string) string {
	t.Helper()
	c := parley.Conversation{ID: id, Epoch: "ep2", CreatedAt: t0}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(id, 1, ""), event(id, 2, "a")},
		State: []byte(`{}`), Import: lease(owner, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// testSweepImports checks the backend's sweep rule on four imports: this
// sweeper's and another owner's, each with a live and an ended lease. It
// runs alone (the sweep is not limited to this test's conversations).
func testSweepImports(t *testing.T, s store.Store, b Backend) {
	me, other := uuid.NewString(), uuid.NewString()
	mineLive, mineEnded := newImport(t, s, me, time.Hour), newImport(t, s, me, -time.Second)
	otherLive, otherEnded := newImport(t, s, other, time.Hour), newImport(t, s, other, 0)
	plain := newConversation(t, s)
	removed, err := s.SweepImports(ctx(t), store.SweepImportsParams{Owner: me, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{mineEnded, otherEnded}
	if b.OneProcess {
		// The store is this process's alone: another owner's import is one
		// that a process before this one left, live lease or not.
		want = append(want, otherLive)
	}
	slices.Sort(want)
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Fatalf("swept %v, want %v (mine live %s, mine ended %s, other live %s, other ended %s)", removed, want, mineLive, mineEnded, otherLive, otherEnded)
	}
	for _, id := range []string{mineLive, mineEnded, otherLive, otherEnded, plain} {
		n, kept := rowsOf(t, s, id), !slices.Contains(removed, id)
		if kept != (n > 0) {
			t.Fatalf("conversation %s: %d events and rows, though it was %s", id, n, map[bool]string{true: "kept", false: "swept"}[kept])
		}
	}
	if got, _ := visible(t, s, plain); !got {
		t.Fatal("a sweep removed an ordinary conversation")
	}
	// Limited to one conversation, with a time past its lease.
	later := parley.NewTime(t0.Add(2 * time.Hour))
	removed, err = s.SweepImports(ctx(t), store.SweepImportsParams{Owner: me, Now: later, ConversationID: plain})
	if err != nil || len(removed) != 0 {
		t.Fatalf("sweeping an ordinary conversation: %v, %v", removed, err)
	}
	removed, err = s.SweepImports(ctx(t), store.SweepImportsParams{Owner: me, Now: later, ConversationID: mineLive})
	if err != nil || !slices.Equal(removed, []string{mineLive}) {
		t.Fatalf("sweeping an ended import by id: %v, %v", removed, err)
	}
	if !b.OneProcess {
		if removed, err := s.SweepImports(ctx(t), store.SweepImportsParams{Owner: me, Now: later, Limit: 1}); err != nil || !slices.Equal(removed, []string{otherLive}) {
			t.Fatalf("sweeping once the other owner's lease ended: %v, %v", removed, err)
		}
	}
	// A swept import's id can be imported again.
	again := newImportWithID(t, s, otherEnded, me)
	if err := s.FinishImport(ctx(t), again, me); err != nil {
		t.Fatal(err)
	}
}
