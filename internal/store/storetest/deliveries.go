package storetest

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testDeliveriesDone: a delivery given up (failed) or delivered is done: no
// take takes it again; ListDeliveries lists the rows of one status by id,
// in pages, with what became of them (attempts, last error); and
// PruneDeliveries removes the done rows older than its bound, a page at a
// time, and no pending one.
func testDeliveriesDone(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	ds := make([]*parley.Delivery, 6)
	for i := range ds {
		ds[i] = &parley.Delivery{ID: fmt.Sprintf("%s:d%d", id, i), ConversationID: id, MessageID: fmt.Sprintf("m%d", i),
			Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "hi", NextAttemptAt: t0, CreatedAt: t0}
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Deliveries: ds, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// m0-m2 are given up at hour 1, 2 and 3, m3 delivered at hour 1; m4 and
	// m5 stay pending, m5 with a failed attempt.
	at := func(h int) parley.Time { return parley.NewTime(t0.Add(time.Duration(h) * time.Hour)) }
	for i, d := range ds[:3] {
		d.Status, d.GaveUpAt, d.Attempts, d.LastError = parley.DeliveryFailed, at(i+1), i+1, fmt.Sprintf("webhook answered HTTP %d", 500+i)
	}
	ds[3].Status, ds[3].DeliveredAt = parley.DeliveryDelivered, at(1)
	ds[5].Attempts, ds[5].LastError, ds[5].NextAttemptAt = 1, "timeout", at(1)
	for _, d := range append(ds[:4:4], ds[5]) {
		if err := s.UpdateDelivery(ctx(t), d); err != nil {
			t.Fatal(err)
		}
	}
	end := parley.NewTime(t0.Add(1000 * time.Hour))
	taken, err := s.TakeDeliveries(ctx(t), store.TakeDeliveriesParams{Now: end, Until: end, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if got := mine(id, taken); got != "m4 m5" {
		t.Fatalf("taken: %s, want the pending m4 m5", got)
	}
	// Listed by status, and in pages by id.
	list := func(status parley.DeliveryStatus, after string, limit int) []*parley.Delivery {
		t.Helper()
		got, err := s.ListDeliveries(ctx(t), store.ListDeliveriesParams{Status: status, After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	failed := list(parley.DeliveryFailed, id+":", 1000)
	if got := mine(id, failed); got != "m0 m1 m2" {
		t.Fatalf("failed: %s, want m0 m1 m2", got)
	}
	if d := failed[1]; d.Status != parley.DeliveryFailed || d.Attempts != 2 || d.LastError != "webhook answered HTTP 501" || !d.GaveUpAt.Equal(at(2).Time) || d.Content != "hi" {
		t.Fatalf("a failed delivery lists as %+v", d)
	}
	if got := mine(id, list(parley.DeliveryPending, id+":", 1000)); got != "m4 m5" {
		t.Fatalf("pending: %s, want m4 m5", got)
	}
	if d := list(parley.DeliveryDelivered, id+":", 1000); mine(id, d) != "m3" || d[0].Status != parley.DeliveryDelivered {
		t.Fatalf("delivered: %s", mine(id, d))
	}
	if got := mine(id, list("", id+":", 1000)); got != "m0 m1 m2 m3 m4 m5" {
		t.Fatalf("all: %s", got)
	}
	page := list(parley.DeliveryFailed, id+":", 2)
	if got := mine(id, page); got != "m0 m1" {
		t.Fatalf("first page: %s", got)
	}
	if got := mine(id, list(parley.DeliveryFailed, page[1].ID, 2)); got != "m2" {
		t.Fatalf("second page: %s", got)
	}
	big, err := s.ListDeliveries(ctx(t), store.ListDeliveriesParams{After: id + ":", Limit: 1000, MaxBytes: 1})
	if err != nil || len(big) != 1 {
		t.Fatalf("a page of at most 1 byte holds %d rows (%v), want the one that reaches it", len(big), err)
	}
	// Pruned: what was done before hour 3, not what was done then, nor
	// what is pending; a page at a time.
	prune := func(before parley.Time, limit int) int {
		t.Helper()
		n, err := s.PruneDeliveries(ctx(t), store.PruneDeliveriesParams{Before: before, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prune(at(2), 1); n != 1 {
		t.Fatalf("a prune of one row removed %d", n)
	}
	prune(at(3), 1000)
	if got := mine(id, list("", id+":", 1000)); got != "m2 m4 m5" {
		t.Fatalf("after the prune: %s, want m2 m4 m5", got)
	}
}

// mine is the message ids of conversation id's deliveries among ds.
func mine(id string, ds []*parley.Delivery) string {
	var out []string
	for _, d := range ds {
		if d.ConversationID == id {
			out = append(out, d.MessageID)
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// UpgradeKeepsDeliveries is the outbox's upgrade test of every backend:
// raw is a database at the version before outbox rows had a status,
// reached through database/sql; open opens it as a store with the current
// code, which migrates it. A row delivered before reads as delivered and
// done (not taken, pruned once old), a pending one as pending and due.
func UpgradeKeepsDeliveries(t *testing.T, raw *sql.DB, open func() store.Store) {
	t.Helper()
	id := uuid.NewString()
	for _, r := range []struct {
		msg, data string
		delivered int
	}{
		{"m1", `{"id":"` + id + `:m1","conversationId":"` + id + `","messageId":"m1","channel":{"type":"slack","id":"C1"},"content":"a","attempts":0,"nextAttemptAt":"2026-01-01T00:01:00.000Z","deliveredAt":"2026-01-01T00:00:30.000Z","createdAt":"2026-01-01T00:00:00.000Z"}`, 1},
		{"m2", `{"id":"` + id + `:m2","conversationId":"` + id + `","messageId":"m2","channel":{"type":"slack","id":"C1"},"content":"b","attempts":3,"nextAttemptAt":"2026-01-01T00:00:00.000Z","deliveredAt":null,"lastError":"webhook answered HTTP 500","createdAt":"2026-01-01T00:00:00.000Z"}`, 0},
	} {
		next := "2026-01-01T00:00:00.000Z"
		if r.delivered == 1 {
			next = "2026-01-01T00:01:00.000Z"
		}
		if _, err := raw.Exec(`INSERT INTO outbox (id, conversation_id, message_id, data, delivered, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			id+":"+r.msg, id, r.msg, r.data, r.delivered, next); err != nil {
			t.Fatal(err)
		}
	}
	s := open()
	defer s.Close()
	list := func(status parley.DeliveryStatus) []*parley.Delivery {
		t.Helper()
		ds, err := s.ListDeliveries(ctx(t), store.ListDeliveriesParams{Status: status, After: id + ":", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	if d := list(parley.DeliveryDelivered); mine(id, d) != "m1" || d[0].Status != parley.DeliveryDelivered {
		t.Fatalf("delivered after the upgrade: %s", mine(id, d))
	}
	if d := list(parley.DeliveryPending); mine(id, d) != "m2" || d[0].Status != parley.DeliveryPending || d[0].Attempts != 3 {
		t.Fatalf("pending after the upgrade: %s", mine(id, d))
	}
	now := parley.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	taken, err := s.TakeDeliveries(ctx(t), store.TakeDeliveriesParams{Now: now, Until: now, Limit: 10})
	if err != nil || mine(id, taken) != "m2" {
		t.Fatalf("taken after the upgrade: %s (%v), want m2", mine(id, taken), err)
	}
	// Done when it was delivered (not when its lease ended).
	if n, err := s.PruneDeliveries(ctx(t), store.PruneDeliveriesParams{Before: parley.NewTime(time.Date(2026, 1, 1, 0, 0, 31, 0, time.UTC)), Limit: 10}); err != nil || n != 1 || len(list("")) != 1 {
		t.Fatalf("pruned %d (%v), want the delivered row", n, err)
	}
}

func testDeliveries(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	later := parley.NewTime(t0.Add(time.Hour))
	due := &parley.Delivery{ID: uuid.NewString(), ConversationID: id, MessageID: "m1", Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "hi", NextAttemptAt: t0, CreatedAt: t0}
	notYet := &parley.Delivery{ID: uuid.NewString(), ConversationID: id, MessageID: "m2", Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "later", NextAttemptAt: later, CreatedAt: t0}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Deliveries: []*parley.Delivery{due, notYet}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// take leases what is due at now until until, and returns this
	// conversation's rows of it.
	take := func(now, until parley.Time) []*parley.Delivery {
		ds, err := s.TakeDeliveries(ctx(t), store.TakeDeliveriesParams{Now: now, Until: until, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(ds, func(d *parley.Delivery) bool { return d.ConversationID != id })
	}
	ids := func(ds []*parley.Delivery) string {
		var out []string
		for _, d := range ds {
			out = append(out, d.MessageID)
		}
		return fmt.Sprint(out)
	}
	lease := parley.NewTime(t0.Add(time.Minute))
	got := take(t0, lease)
	if ids(got) != "[m1]" || !got[0].NextAttemptAt.Equal(lease.Time) {
		t.Fatalf("taken at t0 = %s, want [m1] leased until %s", ids(got), lease)
	}
	if got := take(t0, lease); len(got) != 0 {
		t.Fatalf("a leased row was taken again within its lease: %s", ids(got))
	}
	// Once the lease is over (its node died), both are due: oldest first.
	if got := take(later, parley.NewTime(later.Add(time.Minute))); ids(got) != "[m1 m2]" {
		t.Fatalf("taken later = %s, want [m1 m2]", ids(got))
	}
	due.Attempts, due.NextAttemptAt, due.LastError = 1, later, "HTTP 500"
	if err := s.UpdateDelivery(ctx(t), due); err != nil {
		t.Fatal(err)
	}
	if got := take(t0, lease); len(got) != 0 {
		t.Fatalf("a failed delivery is due again at once: %s", ids(got))
	}
	due.DeliveredAt = later
	if err := s.UpdateDelivery(ctx(t), due); err != nil {
		t.Fatal(err)
	}
	end := parley.NewTime(later.Add(24 * time.Hour))
	for _, d := range take(end, end) {
		if d.ID == due.ID {
			t.Fatal("a delivered row is still due")
		}
		if d.ID == notYet.ID && (d.Content != "later" || d.Channel.ID != "C1") {
			t.Fatalf("delivery did not round-trip: %+v", d)
		}
	}
	wantCode(t, s.UpdateDelivery(ctx(t), &parley.Delivery{ID: uuid.NewString()}), parley.ENOTFOUND)
}

// testTakeDeliveriesOnce: takers racing over the same due rows (nodes
// polling one database) take each row once between them.
func testTakeDeliveriesOnce(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	const n = 60
	var ds []*parley.Delivery
	for i := range n {
		ds = append(ds, &parley.Delivery{ID: uuid.NewString(), ConversationID: id, MessageID: fmt.Sprintf("m%d", i),
			Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "hi", NextAttemptAt: t0, CreatedAt: t0})
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Deliveries: ds, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	taken := takeAtOnce(t, func() ([]string, error) {
		got, err := s.TakeDeliveries(ctx(t), store.TakeDeliveriesParams{Now: t0, Until: parley.NewTime(t0.Add(time.Hour)), Limit: 7})
		var mine []string
		for _, d := range got {
			if d.ConversationID == id {
				mine = append(mine, d.MessageID)
			}
		}
		return mine, err
	})
	if len(taken) != n {
		t.Fatalf("%d of %d rows taken", len(taken), n)
	}
	for m, k := range taken {
		if k != 1 {
			t.Fatalf("row %s taken %d times", m, k)
		}
	}
}

// takeAtOnce runs four takers at once, as nodes polling one database do,
// each calling take ten times, then calls take alone until a call takes
// nothing, and counts how often each id came.
func takeAtOnce(t *testing.T, take func() ([]string, error)) map[string]int {
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				got, err := take()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range got {
					taken[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// A round may find every row it chose locked by another's round and
	// take nothing: what is left is taken by the rounds after, here one
	// at a time, as a scheduler's next round would.
	for {
		got, err := take()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return taken
		}
		for _, id := range got {
			taken[id]++
		}
	}
}
