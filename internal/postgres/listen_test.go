package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/store"
)

// TestParseNotice reads the lines a notification carries, and skips those
// it cannot read.
func TestParseNotice(t *testing.T) {
	for _, c := range []struct {
		line string
		want feed.Notice
		ok   bool
	}{
		{"c1 5", feed.Notice{ConversationID: "c1", Seq: 5}, true},
		{"c1 12 q", feed.Notice{ConversationID: "c1", Seq: 12, Queue: true}, true},
		{"c1 0 d", feed.Notice{ConversationID: "c1", Deleted: true}, true},
		{"  c1   7  ", feed.Notice{ConversationID: "c1", Seq: 7}, true},
		{"c1 7 x", feed.Notice{ConversationID: "c1", Seq: 7}, true},                // a flag of a newer node: passed over
		{"c1 7 x q", feed.Notice{ConversationID: "c1", Seq: 7, Queue: true}, true}, // and the flags after it read
		{"", feed.Notice{}, false},
		{"   ", feed.Notice{}, false},
		{"c1", feed.Notice{}, false},
		{"c1 seven", feed.Notice{}, false},
		{"c1 -1", feed.Notice{}, false},
		{"c1 5.0", feed.Notice{}, false},
		{"c1 99999999999999999999", feed.Notice{}, false},
	} {
		got, ok := parseNotice(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("parseNotice(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// TestQueueNotifySplitsPayloads: the lines of a commit that do not fit in
// one notification's payload go in several, each under PostgreSQL's limit,
// every line whole and in order.
func TestQueueNotifySplitsPayloads(t *testing.T) {
	var lines []string
	for i := range 500 {
		lines = append(lines, notice(uuid.NewString(), int64(i*1000+i), i%3 == 0))
	}
	batch := &pgx.Batch{}
	queueNotify(batch, lines)
	var got []string
	for _, q := range batch.QueuedQueries {
		payload := q.Arguments[0].(string)
		if len(payload) > maxPayload {
			t.Fatalf("a payload of %d bytes, over %d", len(payload), maxPayload)
		}
		got = append(got, strings.Split(payload, "\n")...)
	}
	if len(batch.QueuedQueries) < 2 || !slices.Equal(got, lines) {
		t.Fatalf("%d notifications carry %d lines; want several carrying the %d lines in order", len(batch.QueuedQueries), len(got), len(lines))
	}
	empty := &pgx.Batch{}
	queueNotify(empty, nil)
	if len(empty.QueuedQueries) != 0 {
		t.Fatalf("no lines make %d notifications", len(empty.QueuedQueries))
	}
}

// TestSchemasHaveChannelsOfTheirOwn: a listener on one schema hears the
// appends of its schema, not those of another schema of the database
// (committed before, they would come first on a shared channel).
func TestSchemasHaveChannelsOfTheirOwn(t *testing.T) {
	ours, url := openSchema(t)
	theirs, _ := openSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	listen, err := listenQuery(ctx, listener)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listener.Exec(ctx, listen); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		db *DB
		id string
	}{{theirs, "theirs"}, {ours, "ours"}} {
		c := parley.Conversation{ID: w.id, Epoch: "ep", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: parley.NewTime(time.Now())}
		if err := w.db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{traceEvent(w.id, 1)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := w.db.Append(ctx, store.AppendParams{ConversationID: w.id, ExpectSeq: 1, Events: []parley.Event{traceEvent(w.id, 2)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := listener.WaitForNotification(ctx)
	if err != nil || n.Payload != "ours 2" {
		t.Fatalf("the first notification heard is %+v (%v), want ours 2", n, err)
	}
	if got, err := Listeners(ctx, url); err != nil || got != 1 {
		t.Fatalf("%d listeners on our schema (%v), want 1", got, err)
	}
}

// notices follows the notifications of the database through a Broker, on
// a schema of its own, and yields what it hears of the conversations whose
// ids start with prefix.
func notices(t *testing.T, url, prefix string) (<-chan feed.Notice, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	heard, listening := make(chan feed.Notice, 1000), make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Broker{URL: url}.Listen(ctx, func(n feed.Notice) {
			if strings.HasPrefix(n.ConversationID, prefix) {
				heard <- n
			}
		}, func() { listening <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return heard, listening
}

// next returns the next notice heard, failing the test after 30 s.
func next(t *testing.T, heard <-chan feed.Notice) feed.Notice {
	t.Helper()
	select {
	case n := <-heard:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notification within 30 s")
		return feed.Notice{}
	}
}

// TestBrokerHearsLargeGroupsAndDeletes: through the Broker, a node hears
// every conversation of a group commit whose lines do not fit in one
// notification, each at its last seq; and a delete, marked deleted.
func TestBrokerHearsLargeGroupsAndDeletes(t *testing.T) {
	db, url := openSchema(t)
	ctx := context.Background()
	prefix := uuid.NewString()[:8]
	heard, listening := notices(t, url, prefix)
	<-listening

	const n = 400 // about 50 bytes a line: three notifications
	var group []*store.AppendParams
	for i := range n {
		id := fmt.Sprintf("%s-%04d-%s", prefix, i, uuid.NewString())
		c := parley.Conversation{ID: id, Epoch: "ep", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: parley.NewTime(time.Now())}
		if err := db.CreateConversation(ctx, store.CreateConversationParams{Conversation: c, Events: []parley.Event{traceEvent(id, 1)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		group = append(group, &store.AppendParams{ConversationID: id, ExpectSeq: 1, Epoch: "ep", Events: []parley.Event{traceEvent(id, 2), traceEvent(id, 3)}, State: []byte(`{}`)})
	}
	missed, err := db.appendGroup(ctx, group)
	if err != nil || slices.Contains(missed, true) {
		t.Fatalf("the group: %v, missed %v", err, missed)
	}
	want := map[string]bool{}
	for _, p := range group {
		want[p.ConversationID] = true
	}
	for len(want) > 0 {
		got := next(t, heard)
		if !want[got.ConversationID] || got.Seq != 3 || got.Queue || got.Deleted {
			t.Fatalf("heard %+v; want each of the group's conversations once, at seq 3", got)
		}
		delete(want, got.ConversationID)
	}

	gone := group[0].ConversationID
	if err := db.DeleteConversation(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if got := next(t, heard); got != (feed.Notice{ConversationID: gone, Deleted: true}) {
		t.Fatalf("heard %+v of a delete; want %s marked deleted", got, gone)
	}
}

func traceEvent(conv string, seq int64) parley.Event {
	return parley.Event{ConversationID: conv, Seq: seq, Type: parley.EventTrace, TurnID: "t", AgentID: "a", Finality: parley.FinalityNone,
		Time: parley.NewTime(time.Now()), Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))}
}

// openSchema opens a store on a schema of its own, closed when the test
// ends, and returns it with its URL.
func openSchema(t *testing.T) (*DB, string) {
	t.Helper()
	url := pgtest.Schema(t)
	db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, url
}
