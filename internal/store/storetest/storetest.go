// Package storetest is the conformance suite of store.Store: the same tests
// run against every backend, as River's riverdrivertest does. Each test makes
// its own conversations and tokens with fresh ids and never assumes an empty
// store, so one database can serve the whole suite in parallel.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// Backend describes the backend under test where the store interface lets
// backends differ.
type Backend struct {
	// OneProcess is true for a store that one process owns (SQLite): its
	// SweepImports removes every import of another owner, live lease or not.
	OneProcess bool
}

// Exercise runs the suite against the stores newStore makes. newStore may
// return the same store every time.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store, b Backend) {
	// The sweep is not limited to one test's conversations, so it runs
	// first, alone: the other tests wait in t.Parallel until it is done.
	t.Run("SweepImports", func(t *testing.T) { testSweepImports(t, newStore(t), b) })
	// So are the outbox's takes, which lease every due row: alone too.
	t.Run("Outbox", func(t *testing.T) { testDeliveries(t, newStore(t)) })
	t.Run("TakeDeliveriesOnce", func(t *testing.T) { testTakeDeliveriesOnce(t, newStore(t)) })
	// The prune removes any conversation's old rows: alone too.
	t.Run("DeliveriesDone", func(t *testing.T) { testDeliveriesDone(t, newStore(t)) })
	// RenewEpochs renews every conversation's epoch: alone too.
	t.Run("RenewEpochs", func(t *testing.T) { testRenewEpochs(t, newStore(t)) })
	// So are the scheduler's takes, which lease every due task.
	t.Run("Tasks", func(t *testing.T) { testTasks(t, newStore(t)) })
	t.Run("DueTasksFairRounds", func(t *testing.T) { testDueTasksFair(t, newStore(t)) })
	t.Run("TakeDueTasksOnce", func(t *testing.T) { testTakeDueTasksOnce(t, newStore(t)) })
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateAndGetConversation", testCreateAndGet},
		{"ListConversationsPagesEachOnce", testListConversations},
		{"ListConversationsByLastActivity", testListByActivity},
		{"ListConversationsFilters", testListFilters},
		{"ListConversationsFiltersBounded", testListFiltersBounded},
		{"ListConversationsOfAMember", testListConversationsOfAMember},
		{"ListConversationsByTitle", testListConversationsByTitle},
		{"AppendDense", testAppendDense},
		{"AppendConflictWritesNothing", testAppendConflict},
		{"AppendRejectsSeqGaps", testAppendGaps},
		{"AppendUnknownConversation", testAppendUnknown},
		{"AppendIsAtomic", testAppendAtomic},
		{"ConversationChange", testConversationChange},
		{"MessageUpsert", testMessageUpsert},
		{"NamesTakenOnce", testNamesTakenOnce},
		{"NULRefusedAlike", testNULRefusedAlike},
		{"RemoveMessages", testRemoveMessages},
		{"DeleteConversation", testDeleteConversation},
		{"ImportInvisibleUntilFinished", testImportInvisibleUntilFinished},
		{"AbortImport", testAbortImport},
		{"ImportWritesRowAgain", testImportWritesRowAgain},
		{"RunnerLeases", testRunnerLeases},
		{"AgentWideLeases", testAgentWideLeases},
		{"QueuedFor", testQueuedFor},
		{"TasksPerAgentBound", testTasksPerAgent},
		{"TaskOnlyAppend", testTaskOnlyAppend},
		{"QueueKeptApart", testQueueKeptApart},
		{"NilStateKeepsSnapshot", testNilStateKeepsSnapshot},
		{"ReadEventsPaging", testReadEvents},
		{"ReadSnapshot", testReadSnapshot},
		{"ListMessagesFilters", testListMessages},
		{"RepliesAndThreads", testThreads},
		{"ThreadsAreBounded", testThreadsAreBounded},
		{"Idempotency", testIdempotency},
		{"Tokens", testTokens},
		{"ConcurrentAppendsManyConversations", testConcurrentMany},
		{"ConcurrentAppendsOneConversation", testConcurrentOne},
		{"BadAppendsAmongMany", testBadAppendsAmongMany},
		{"Exclusive", testExclusive},
		{"SearchRanksAndPages", testSearchRanksAndPages},
		{"SearchPhrases", testSearchPhrases},
		{"SearchPrefixes", testSearchPrefixes},
		{"SearchNarrowsAndFilters", testSearchNarrowsAndFilters},
		{"SearchFollowsTheRows", testSearchFollowsTheRows},
		{"SearchLongAndOddText", testSearchLongAndOddText},
		{"SearchHostileQueries", testSearchHostileQueries},
		{"CompactSpans", testCompactSpans},
		{"CompactInSteps", testCompactInSteps},
		{"CompactRemovedMessages", testCompactRemovedMessages},
		{"CompactRefersToRows", testCompactRefersToRows},
		{"CompactRefusals", testCompactRefusals},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var t0 = parley.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 123_000_000, time.UTC))

// newConversation creates a conversation with its created event (seq 1).
func newConversation(t *testing.T, s store.Store) string {
	t.Helper()
	id := uuid.NewString()
	c := parley.Conversation{ID: id, Epoch: "ep", Title: "t", Participants: []string{"a", "b"}, TurnPolicy: parley.PolicyRoundRobin,
		MessageFormat: "v2", Metadata: json.RawMessage(`{"k":1}`), CreatedBy: "a", CreatedAt: t0}
	err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(id, 1, "")}, State: []byte(`{"v":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func event(conv string, seq int64, agent string) parley.Event {
	return parley.Event{ConversationID: conv, Seq: seq, Type: parley.EventTrace, Turn: int(seq), TurnID: "tid", AgentID: agent,
		Finality: parley.FinalityNone, Time: t0, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))}
}

// message returns a message written at seq.
func message(conv, id string, seq int64, replyTo string, depth int) *parley.Message {
	return &parley.Message{ID: id, ConversationID: conv, Seq: seq, Role: parley.RoleAssistant, AgentID: "a",
		Parts: []parley.Part{{Type: parley.PartText, Text: id}}, Content: id, Status: parley.StatusComplete, Turn: 1, TurnID: "turn-" + id,
		ReplyTo: replyTo, Depth: depth, Finality: parley.FinalityNone, CreatedAt: t0, UpdatedAt: t0}
}

// appendMessages appends one event per message, in order, after seq after.
func appendMessages(t *testing.T, s store.Store, conv string, after int64, ms ...*parley.Message) int64 {
	t.Helper()
	var events []parley.Event
	for i, m := range ms {
		m.Seq = after + int64(i) + 1
		events = append(events, event(conv, m.Seq, m.AgentID))
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: conv, ExpectSeq: after, Events: events, Messages: ms, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return after + int64(len(ms))
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := parley.ErrorCode(err); got != code {
		t.Fatalf("err = %v (code %q), want code %q", err, got, code)
	}
}

func testCreateAndGet(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	rec, err := s.GetConversation(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	c := rec.Conversation
	if c.ID != id || c.Epoch != "ep" || c.Title != "t" || len(c.Participants) != 2 || c.Participants[1] != "b" ||
		c.TurnPolicy != parley.PolicyRoundRobin || c.MessageFormat != "v2" || string(c.Metadata) != `{"k":1}` || c.CreatedBy != "a" || !c.CreatedAt.Equal(t0.Time) {
		t.Fatalf("conversation did not round-trip: %+v", c)
	}
	if rec.LastSeq != 1 || string(rec.State) != `{"v":1}` {
		t.Fatalf("lastSeq %d state %s", rec.LastSeq, rec.State)
	}
	err = s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)})
	wantCode(t, err, parley.EBUSY)
	_, err = s.GetConversation(ctx(t), uuid.NewString())
	wantCode(t, err, parley.ENOTFOUND)
}

func testListConversations(t *testing.T, s store.Store) {
	mine := map[string]bool{}
	for i := 0; i < 5; i++ {
		mine[newConversation(t, s)] = true
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		recs, next, err := s.ListConversations(ctx(t), store.ListConversationsParams{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 2 {
			t.Fatalf("page of %d rows, limit 2", len(recs))
		}
		for _, r := range recs {
			if seen[r.Conversation.ID] {
				t.Fatalf("conversation %s listed twice", r.Conversation.ID)
			}
			seen[r.Conversation.ID] = true
		}
		if next == "" || pages > 100000 {
			break
		}
		cursor = next
	}
	for id := range mine {
		if !seen[id] {
			t.Fatalf("conversation %s never listed", id)
		}
	}
	_, _, err := s.ListConversations(ctx(t), store.ListConversationsParams{Cursor: "!!bad"})
	wantCode(t, err, parley.EINVALID)
}

// testListConversationsOfAMember: with Member set, only the conversations
// made with that agent among their members are listed, most recently
// active first (here, the newest: each has only its first event), in
// pages (of a count, or of bytes); a deleted conversation is no longer
// listed.
func testListConversationsOfAMember(t *testing.T, s store.Store) {
	agent, other := "m-"+uuid.NewString()[:8], "o-"+uuid.NewString()[:8]
	var want []string
	for i := range 5 {
		id := uuid.NewString()
		at := parley.NewTime(t0.Add(time.Duration(i) * time.Second))
		members := []string{other}
		if i != 2 {
			members = append(members, agent)
			want = append([]string{id}, want...) // newest first
		}
		c := parley.Conversation{ID: id, Epoch: "ep", Participants: []string{}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: at}
		if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: members, Events: []parley.Event{eventAt(id, 1, at)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// In pages of 2, and in pages of a byte, which end after one each.
	for _, p := range []store.ListConversationsParams{{Limit: 2}, {Limit: 100, MaxBytes: 1}} {
		var got []string
		pages := 0
		for p.Member = agent; ; pages++ {
			recs, next, err := s.ListConversations(ctx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				got = append(got, r.Conversation.ID)
			}
			if next == "" {
				break
			}
			p.Cursor = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || p.MaxBytes > 0 && pages != len(want) {
			t.Fatalf("conversations of %s in %d pages (%+v):\n%v\nwant\n%v", agent, pages+1, p, got, want)
		}
	}
	if err := s.DeleteConversation(ctx(t), want[0]); err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.ListConversations(ctx(t), store.ListConversationsParams{Member: agent})
	if err != nil || len(recs) != 3 || recs[0].Conversation.ID != want[1] {
		t.Fatalf("after deleting the newest: %d conversations, %v", len(recs), err)
	}
	if recs, _, err := s.ListConversations(ctx(t), store.ListConversationsParams{Member: "nobody-" + agent}); err != nil || len(recs) != 0 {
		t.Fatalf("an agent in none lists %d, %v", len(recs), err)
	}
}

// testListConversationsByTitle: with Title set, only the conversations
// whose title contains it are listed, whatever the case of ASCII letters;
// %, _ and \ match only themselves; Title and Member narrow together, and
// pages of a narrowed list hold every match once.
func testListConversationsByTitle(t *testing.T, s store.Store) {
	tag := uuid.NewString()[:8] // this run's titles, apart from other tests' in the same store
	agent := "t-" + tag
	titles := []string{"Plan " + tag, "the " + tag + " PLAN b", "100% " + tag, "under_" + tag, `back\slash ` + tag, "nothing " + tag, ""}
	ids := map[string]string{}
	for i, title := range titles {
		id := uuid.NewString()
		at := parley.NewTime(t0.Add(time.Duration(i) * time.Second))
		members := []string{"someone"}
		if i%2 == 0 {
			members = append(members, agent)
		}
		c := parley.Conversation{ID: id, Epoch: "ep", Title: title, Participants: []string{}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: at}
		if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: members, Events: []parley.Event{eventAt(id, 1, at)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		ids[id] = title
	}
	mine := map[string]bool{}
	for id := range ids {
		mine[id] = true
	}
	list := func(p store.ListConversationsParams) []string {
		t.Helper()
		var got []string
		for _, id := range walkList(t, s, p, mine) {
			got = append(got, ids[id])
		}
		return got
	}
	for _, c := range []struct {
		p    store.ListConversationsParams
		want []string // newest first
	}{
		{store.ListConversationsParams{Title: "plan " + tag}, []string{"Plan " + tag}},
		{store.ListConversationsParams{Title: tag + " plan", Limit: 1}, []string{"the " + tag + " PLAN b"}},
		{store.ListConversationsParams{Title: "pLaN", Limit: 1}, []string{"the " + tag + " PLAN b", "Plan " + tag}},
		{store.ListConversationsParams{Title: "% " + tag}, []string{"100% " + tag}},
		{store.ListConversationsParams{Title: "_" + tag}, []string{"under_" + tag}},
		{store.ListConversationsParams{Title: `\s`}, []string{`back\slash ` + tag}},
		{store.ListConversationsParams{Title: tag, Member: agent, Limit: 2}, []string{`back\slash ` + tag, "100% " + tag, "Plan " + tag}},
		{store.ListConversationsParams{Title: "absent " + tag}, nil},
	} {
		if got := list(c.p); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("title %q member %q: %q, want %q", c.p.Title, c.p.Member, got, c.want)
		}
	}
}

func testAppendDense(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	last := appendMessages(t, s, id, 1, message(id, "m1", 0, "", 0), message(id, "m2", 0, "", 0))
	last = appendMessages(t, s, id, last, message(id, "m3", 0, "", 0))
	rec, err := s.GetConversation(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastSeq != 4 || last != 4 {
		t.Fatalf("lastSeq %d, want 4", rec.LastSeq)
	}
	if h, err := s.Head(ctx(t), id); err != nil || h != (store.Head{Seq: 4, Epoch: "ep"}) {
		t.Fatalf("Head = %+v, %v; want seq 4 of epoch ep", h, err)
	}
	_, err = s.Head(ctx(t), uuid.NewString())
	wantCode(t, err, parley.ENOTFOUND)

	// Heads reads many at once and leaves out the unknown.
	other := newConversation(t, s)
	unknown := uuid.NewString()
	heads, err := s.Heads(ctx(t), []string{id, other, unknown})
	if err != nil || len(heads) != 2 || heads[id] != (store.Head{Seq: 4, Epoch: "ep"}) || heads[other] != (store.Head{Seq: 1, Epoch: "ep"}) {
		t.Fatalf("Heads = %v, %v; want %s:4 %s:1 of epoch ep and not %s", heads, err, id, other, unknown)
	}
	if heads, err := s.Heads(ctx(t), nil); err != nil || len(heads) != 0 {
		t.Fatalf("Heads of none = %v, %v", heads, err)
	}
	_, err = s.Heads(ctx(t), make([]string, store.MaxHeads+1))
	wantCode(t, err, parley.EINVALIDVALUE)
}

func testAppendConflict(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	appendMessages(t, s, id, 1, message(id, "m1", 0, "", 0))
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "x")},
		Messages: []*parley.Message{message(id, "late", 2, "", 0)}, State: []byte(`{"stale":true}`)})
	wantCode(t, err, parley.ECONFLICT)
	_, err = s.GetMessage(ctx(t), id, "late")
	wantCode(t, err, parley.ENOTFOUND)
	rec, _ := s.GetConversation(ctx(t), id)
	if string(rec.State) == `{"stale":true}` || rec.LastSeq != 2 {
		t.Fatalf("a conflicting append changed the conversation: %d %s", rec.LastSeq, rec.State)
	}
}

func testAppendGaps(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 3, "x")}, State: []byte(`{}`)})
	wantCode(t, err, parley.EINVALID)
	events, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 10})
	if len(events) != 1 {
		t.Fatalf("%d events after a refused append, want 1", len(events))
	}
}

func testAppendUnknown(t *testing.T, s store.Store) {
	id := uuid.NewString()
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 0, Events: []parley.Event{event(id, 1, "x")}, State: []byte(`{}`)})
	wantCode(t, err, parley.ENOTFOUND)
}

// testAppendIsAtomic: an append whose idempotency key is taken fails whole:
// its events, messages and state are all absent.
func testAppendAtomic(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	key := &store.Idempotency{ConversationID: id, AgentID: "a", Key: "k1", RequestHash: "h", Seq: 2, Response: []byte(`{}`), Time: t0}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Idempotency: key, State: []byte(`{"s":2}`)}); err != nil {
		t.Fatal(err)
	}
	err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 2, Events: []parley.Event{event(id, 3, "a")},
		Messages: []*parley.Message{message(id, "ghost", 3, "", 0)}, Idempotency: key, State: []byte(`{"s":3}`)})
	wantCode(t, err, parley.EBUSY)
	rec, _ := s.GetConversation(ctx(t), id)
	events, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 10})
	_, merr := s.GetMessage(ctx(t), id, "ghost")
	if rec.LastSeq != 2 || string(rec.State) != `{"s":2}` || len(events) != 2 || parley.ErrorCode(merr) != parley.ENOTFOUND {
		t.Fatalf("failed append left traces: lastSeq %d state %s events %d message err %v", rec.LastSeq, rec.State, len(events), merr)
	}
}

func testMessageUpsert(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	m := message(id, "m", 0, "", 0)
	m.Status = parley.StatusStreaming
	last := appendMessages(t, s, id, 1, m)
	m2 := *m
	m2.Parts = []parley.Part{{Type: parley.PartText, Text: "done"}, {Type: parley.PartFinish, Reason: parley.FinishEndTurn}}
	m2.Status, m2.Content = parley.StatusComplete, "done"
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")}, Messages: []*parley.Message{&m2}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMessage(ctx(t), id, "m")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != parley.StatusComplete || len(got.Parts) != 2 || got.Content != "done" || got.Seq != m.Seq {
		t.Fatalf("upserted message = %+v", got)
	}
	all, _ := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 10})
	if len(all) != 1 {
		t.Fatalf("%d rows after an upsert, want 1", len(all))
	}

	// A row written again with other indexed columns (its author, turn
	// and parent) is found by them, and no longer by the old ones.
	m3 := m2
	m3.AgentID, m3.TurnID, m3.ReplyTo, m3.Depth = "b", "turn-b", "parent", 1
	last++
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "b")}, Messages: []*parley.Message{&m3}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	count := func(p store.ListMessagesParams) int {
		t.Helper()
		p.ConversationID, p.Limit = id, 10
		ms, err := s.ListMessages(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	replies, err := s.ListReplies(ctx(t), store.ListRepliesParams{ConversationID: id, MessageID: "parent", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(store.ListMessagesParams{AgentID: "b"}); n != 1 || count(store.ListMessagesParams{AgentID: "a"}) != 0 ||
		count(store.ListMessagesParams{TurnID: "turn-b"}) != 1 || count(store.ListMessagesParams{TurnID: m.TurnID}) != 0 || len(replies) != 1 {
		t.Fatalf("after its indexed columns changed, the row is found by agent b %d, by agent a %d, by its new turn %d, by its old %d, as a reply %d; want 1 0 1 0 1",
			n, count(store.ListMessagesParams{AgentID: "a"}), count(store.ListMessagesParams{TurnID: "turn-b"}), count(store.ListMessagesParams{TurnID: m.TurnID}), len(replies))
	}
	if got, err := s.GetMessage(ctx(t), id, "m"); err != nil || got.AgentID != "b" || got.Depth != 1 || got.Seq != m.Seq {
		t.Fatalf("the row read back is %+v, %v", got, err)
	}
}

func testReadEvents(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	var ms []*parley.Message
	for i := 0; i < 10; i++ {
		ms = append(ms, message(id, fmt.Sprintf("m%d", i), 0, "", 0))
	}
	appendMessages(t, s, id, 1, ms...)
	page, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, After: 3, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 4 || page[0].Seq != 4 || page[3].Seq != 7 {
		t.Fatalf("page = %d events from %d", len(page), page[0].Seq)
	}
	want := event(id, 4, "a")
	got := page[0]
	if got.ConversationID != id || got.Type != want.Type || got.Turn != want.Turn || got.TurnID != want.TurnID || got.AgentID != "a" ||
		got.Finality != want.Finality || !got.Time.Equal(want.Time.Time) || string(got.Data) != string(want.Data) {
		t.Fatalf("event did not round-trip: %+v", got)
	}
	// A page bounded in bytes stops at the event that reaches the bound,
	// and always holds one event.
	one := len(page[0].Data)
	for maxBytes, want := range map[int]int{1: 1, one: 1, one + 1: 2, 2 * one: 2, 2*one + 1: 3} {
		bounded, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, After: 3, Limit: 4, MaxBytes: maxBytes})
		if err != nil || len(bounded) != want || bounded[0].Seq != 4 {
			t.Fatalf("a page of at most %d bytes (events of %d): %d events, err %v; want %d from seq 4", maxBytes, one, len(bounded), err, want)
		}
	}
	none, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: uuid.NewString(), Limit: 4})
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown conversation: %d events, err %v", len(none), err)
	}
}

func testRemoveMessages(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	last := appendMessages(t, s, id, 1, message(id, "keep", 0, "", 0), message(id, "gone1", 0, "keep", 1), message(id, "gone2", 0, "", 0))
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")},
		RemoveMessages: []string{"gone1", "gone2", "never-existed"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 10})
	if err != nil || len(all) != 1 || all[0].ID != "keep" {
		t.Fatalf("after removing: %d messages, %v", len(all), err)
	}
	replies, _ := s.ListReplies(ctx(t), store.ListRepliesParams{ConversationID: id, MessageID: "keep", Limit: 10})
	if len(replies) != 0 {
		t.Fatalf("a removed reply is still listed: %v", replies)
	}
}

func testDeleteConversation(t *testing.T, s store.Store) {
	gone, kept := newConversation(t, s), newConversation(t, s)
	for _, id := range []string{gone, kept} {
		appendMessages(t, s, id, 1, message(id, "m1", 0, "", 0))
	}
	// What else a conversation has: an idempotency record, an outbox row, a task.
	key := &store.Idempotency{ConversationID: gone, AgentID: "a", Key: "k", RequestHash: "h", Seq: 3, Response: []byte(`{}`), Time: t0}
	delivery := &parley.Delivery{ID: uuid.NewString(), ConversationID: gone, MessageID: "m1", Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "hi", NextAttemptAt: t0, CreatedAt: t0}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: gone, ExpectSeq: 2, Events: []parley.Event{event(gone, 3, "a")},
		Idempotency: key, Deliveries: []*parley.Delivery{delivery}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	task := &parley.Task{ID: uuid.NewString(), ConversationID: gone, AgentID: "a", Prompt: "p", EveryMs: 60000, NextRunAt: t0, CreatedAt: t0}
	if err := s.CreateTask(ctx(t), store.CreateTaskParams{Task: task}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConversation(ctx(t), gone); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetIdempotency(ctx(t), gone, "a", "k")
	wantCode(t, err, parley.ENOTFOUND)
	_, err = s.GetTask(ctx(t), task.ID)
	wantCode(t, err, parley.ENOTFOUND)
	due, err := s.TakeDeliveries(ctx(t), store.TakeDeliveriesParams{Now: t0, Until: t0, Limit: 100000})
	if err != nil || slices.ContainsFunc(due, func(d *parley.Delivery) bool { return d.ID == delivery.ID }) {
		t.Fatalf("the outbox row of a deleted conversation is still due: %v", err)
	}
	_, err = s.GetConversation(ctx(t), gone)
	wantCode(t, err, parley.ENOTFOUND)
	if evs, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: gone, Limit: 10}); len(evs) != 0 {
		t.Fatalf("%d events of a deleted conversation remain", len(evs))
	}
	if ms, _ := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: gone, Limit: 10}); len(ms) != 0 {
		t.Fatalf("%d messages of a deleted conversation remain", len(ms))
	}
	if ms, _ := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: kept, Limit: 10}); len(ms) != 1 {
		t.Fatalf("the other conversation has %d messages, want 1", len(ms))
	}
	wantCode(t, s.DeleteConversation(ctx(t), gone), parley.ENOTFOUND)
	// The id is free again, for a conversation of another epoch: its head
	// says so, and an append decided for the deleted one is refused, even
	// at the seq the new one is at.
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: parley.Conversation{ID: gone, Epoch: "e2", CreatedAt: t0},
		Events: []parley.Event{event(gone, 1, "a"), event(gone, 2, "a")}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Head(ctx(t), gone); err != nil || h != (store.Head{Seq: 2, Epoch: "e2"}) {
		t.Fatalf("Head of the conversation made again = %+v, %v; want seq 2 of epoch e2", h, err)
	}
	stale := store.AppendParams{ConversationID: gone, ExpectSeq: 2, Epoch: "ep", Events: []parley.Event{event(gone, 3, "ghost")},
		Messages: []*parley.Message{message(gone, "ghost", 3, "", 0)}, State: []byte(`{"stale":true}`)}
	wantCode(t, s.Append(ctx(t), stale), parley.ECONFLICT)
	wantCode(t, s.Exclusive(ctx(t), gone, func(write func(store.AppendParams) error) error { return write(stale) }), parley.ECONFLICT)
	if evs, _ := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: gone, Limit: 10}); len(evs) != 2 {
		t.Fatalf("the conversation made again has %d events after an append of the deleted one's epoch, want 2", len(evs))
	}
	if _, err := s.GetMessage(ctx(t), gone, "ghost"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("an append of the deleted conversation's epoch wrote a message row: %v", err)
	}
	// Of its own epoch, it is written.
	stale.Epoch = "e2"
	if err := s.Append(ctx(t), stale); err != nil {
		t.Fatal(err)
	}
}
