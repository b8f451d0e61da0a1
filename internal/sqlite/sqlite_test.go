package sqlite_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/storetest"
)

func open(t testing.TB) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformance runs the shared store suite: each test on its own file,
// and once more with every test sharing one file, as a busy server would.
func TestConformance(t *testing.T) {
	t.Run("own file", func(t *testing.T) {
		storetest.Exercise(t, func(t *testing.T) store.Store { return open(t) }, storetest.Backend{OneProcess: true})
	})
	t.Run("shared file", func(t *testing.T) {
		shared := open(t)
		storetest.Exercise(t, func(*testing.T) store.Store { return shared }, storetest.Backend{OneProcess: true})
	})
}

func TestMigrationsAreDenseFromOne(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(sqlite.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 {
		t.Fatalf("found %d migrations", len(names))
	}
	for i, n := range names {
		if want := fmt.Sprintf("%05d_", i+1); !strings.HasPrefix(n, want) {
			t.Fatalf("migration %d is %s, want a name starting %s: versions must have no gaps", i, n, want)
		}
	}
}

// TestUpgradeKeepsData makes a database at version 1 with data in it, then
// opens it with the current code, which migrates it to the latest version.
func TestUpgradeKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, raw := oldDB(t, 1)
	conv := `{"id":"c1","epoch":"e","participants":["a"],"turnPolicy":"round-robin","messageFormat":"v2","createdBy":"boss","createdAt":"2026-01-01T00:00:00.000Z"}`
	msg := `{"id":"m1","conversationId":"c1","seq":2,"role":"user","agentId":"a","parts":[{"type":"text","text":"hi"}],"content":"hi","status":"complete","turn":1,"turnId":"m1","depth":0,"finality":"turn","createdAt":"2026-01-01T00:00:00.000Z","updatedAt":"2026-01-01T00:00:00.000Z"}`
	for _, q := range []string{
		`INSERT INTO conversations VALUES ('c1', '2026-01-01T00:00:00.000Z', '` + conv + `', 2, '{"lastSeq":2}')`,
		`INSERT INTO events VALUES ('c1', 1, 'conversation.created', 0, '', '', 'none', '2026-01-01T00:00:00.000Z', '` + conv + `')`,
		`INSERT INTO events VALUES ('c1', 2, 'message', 1, 'm1', 'a', 'turn', '2026-01-01T00:00:00.000Z', '` + msg + `')`,
		`INSERT INTO messages VALUES ('c1', 'm1', 2, 'm1', NULL, 'a', 0, '` + msg + `')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	from, to, err := sqlite.Migrate(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if from != 1 || to < 2 {
		t.Fatalf("migrated %d -> %d, want 1 -> latest", from, to)
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err := db.GetMessage(ctx, "c1", "m1")
	if err != nil || m.Content != "hi" || m.Finality != parley.FinalityTurn {
		t.Fatalf("old message after upgrade: %+v, %v", m, err)
	}
	events, err := db.ReadEvents(ctx, store.ReadEventsParams{ConversationID: "c1", Limit: 10})
	if err != nil || len(events) != 2 {
		t.Fatalf("old events after upgrade: %d, %v", len(events), err)
	}
	// Its participants and its creator take part in it; nobody else does.
	for agent, want := range map[string]int{"a": 1, "boss": 1, "b": 0, "admin": 0} {
		if recs, _, err := db.ListConversations(ctx, store.ListConversationsParams{Member: agent}); err != nil || len(recs) != want {
			t.Fatalf("conversations of %s after upgrade: %d, %v; want %d", agent, len(recs), err, want)
		}
	}
	// The new tables work on the upgraded file.
	k := &store.Idempotency{ConversationID: "c1", AgentID: "a", Key: "k", RequestHash: "h", Seq: 3, Response: []byte(`{}`), Time: parley.NewTime(time.Now())}
	ev := parley.Event{ConversationID: "c1", Seq: 3, Type: parley.EventTrace, Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: []byte(`{}`)}
	if err := db.Append(ctx, store.AppendParams{ConversationID: "c1", ExpectSeq: 2, Events: []parley.Event{ev}, Idempotency: k, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetIdempotency(ctx, "c1", "a", "k"); err != nil {
		t.Fatal(err)
	}
}

// TestFailedWriteInABatchLeavesTheOthers sends many appends at once, one of
// which conflicts; every other one must be committed. A large write goes
// first so that the others queue up behind it and share a transaction; the
// round repeats (a few times at most) until they did.
func TestFailedWriteInABatchLeavesTheOthers(t *testing.T) {
	t.Parallel()
	db := open(t)
	ctx := context.Background()
	const n = 50
	create := func(id string) {
		c := parley.Conversation{ID: id, Epoch: "e", CreatedAt: parley.NewTime(time.Now())}
		ev := parley.Event{ConversationID: id, Seq: 1, Type: parley.EventConversationCreated, Finality: parley.FinalityNone, Data: []byte(`{}`)}
		if err := db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{ev}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	trace := func(id string, seq int64) parley.Event {
		return parley.Event{ConversationID: id, Seq: seq, Type: parley.EventTrace, Finality: parley.FinalityNone, Data: []byte(`{}`)}
	}
	for round := 0; round < 5; round++ {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-c%d", round, i)
			create(ids[i])
		}
		big := fmt.Sprintf("r%d-big", round)
		create(big)
		var bigEvents []parley.Event
		for seq := int64(2); seq < 20000; seq++ {
			bigEvents = append(bigEvents, trace(big, seq))
		}
		before := db.Stats()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.Append(ctx, store.AppendParams{ConversationID: big, ExpectSeq: 1, Events: bigEvents, State: []byte(`{}`)}); err != nil {
				t.Error(err)
			}
		}()
		errs := make([]error, n)
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				expect := int64(1)
				if i == n/2 {
					expect = 7 // wrong: this one must fail alone
				}
				errs[i] = db.Append(ctx, store.AppendParams{ConversationID: ids[i], ExpectSeq: expect, Events: []parley.Event{trace(ids[i], expect+1)}, State: []byte(`{}`)})
			}(i)
		}
		wg.Wait()
		after := db.Stats()
		for i, err := range errs {
			if i == n/2 {
				if parley.ErrorCode(err) != parley.ECONFLICT {
					t.Fatalf("the bad append: err = %v, want conflict", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("append %d failed: %v", i, err)
			}
			if rec, _ := db.GetConversation(ctx, ids[i]); rec.LastSeq != 2 {
				t.Fatalf("append %d not committed", i)
			}
		}
		if after.Writes-before.Writes != n+1 {
			t.Fatalf("%d writes counted, want %d", after.Writes-before.Writes, n+1)
		}
		if after.Batches-before.Batches < n+1 {
			return // some writes shared a transaction, and the bad one still failed alone
		}
	}
	t.Fatal("in 5 rounds no two writes shared a transaction: group commit does not happen")
}
