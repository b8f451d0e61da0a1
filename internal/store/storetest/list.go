package storetest

// The list of conversations by last activity, and its filters.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// eventAt is event(conv, seq, "") written at at.
func eventAt(conv string, seq int64, at parley.Time) parley.Event {
	e := event(conv, seq, "")
	e.Time = at
	return e
}

// walkList walks the list p selects, page by page, and returns the ids of
// it that are in mine (a test's own conversations), in order.
func walkList(t *testing.T, s store.Store, p store.ListConversationsParams, mine map[string]bool) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		recs, next, err := s.ListConversations(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if mine[r.Conversation.ID] {
				got = append(got, r.Conversation.ID)
			}
		}
		if next == "" || pages > 100000 {
			return got
		}
		p.Cursor = next
	}
}

// testListByActivity: conversations are listed by the time of their last
// event, most recent first, ties by id; an append moves its conversation
// to the top, and an event stamped earlier than the last leaves it where
// it is. A walk with appends between its pages lists no conversation
// twice, and each one that got no event once.
func testListByActivity(t *testing.T, s store.Store) {
	tag := "act-" + uuid.NewString()[:8]
	base := t0.Add(time.Hour)
	at := func(d time.Duration) parley.Time { return parley.NewTime(base.Add(d)) }
	mine := map[string]bool{}
	ids := make([]string, 5)
	seqs := map[string]int64{}
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", tag, i)
		created := at(time.Duration(i) * time.Second)
		if i == 4 {
			created = at(3 * time.Second) // the same time as ids[3]: the greater id first
		}
		c := parley.Conversation{ID: ids[i], Epoch: "ep", Title: tag, Participants: []string{}, TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: created}
		if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{eventAt(ids[i], 1, created)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		mine[ids[i]], seqs[ids[i]] = true, 1
	}
	touch := func(i int, d time.Duration) {
		t.Helper()
		id := ids[i]
		seq := seqs[id] + 1
		if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: seqs[id], Events: []parley.Event{eventAt(id, seq, at(d))}}); err != nil {
			t.Fatal(err)
		}
		seqs[id] = seq
	}
	order := func(want ...int) {
		t.Helper()
		var w []string
		for _, i := range want {
			w = append(w, ids[i])
		}
		for _, limit := range []int{0, 2} {
			if got := walkList(t, s, store.ListConversationsParams{Title: tag, Limit: limit}, mine); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Fatalf("limit %d: listed\n%v\nwant\n%v", limit, got, w)
			}
		}
	}
	order(4, 3, 2, 1, 0)
	touch(0, 10*time.Second)
	order(0, 4, 3, 2, 1)
	touch(1, -time.Hour) // a clock set back: its last activity stays
	order(0, 4, 3, 2, 1)

	// A walk in pages of two, with appends between its pages.
	p := store.ListConversationsParams{Title: tag, Limit: 2}
	recs, next, err := s.ListConversations(ctx(t), p)
	if err != nil || len(recs) != 2 || next == "" {
		t.Fatalf("first page: %d rows, cursor %q, %v", len(recs), next, err)
	}
	var walk []string
	for _, r := range recs {
		walk = append(walk, r.Conversation.ID)
	}
	touch(0, 20*time.Second) // listed already: it moves up, not again into the walk
	touch(2, 21*time.Second) // not reached yet: it moves above the cursor
	p.Cursor = next
	walk = append(walk, walkList(t, s, p, mine)...)
	if want := fmt.Sprint([]string{ids[0], ids[4], ids[3], ids[1]}); fmt.Sprint(walk) != want {
		t.Fatalf("walk with appends between pages: %v, want %v", walk, want)
	}
	order(2, 0, 4, 3, 1)
}

// testListFilters: participant, involves and metadata filters read the
// stored record, narrow together (and with title and member), and page.
func testListFilters(t *testing.T, s store.Store) {
	tag := "flt-" + uuid.NewString()[:8]
	alice, bob, carol := tag+"-alice", tag+"-bob", tag+"-carol"
	mine := map[string]bool{}
	type spec struct {
		participants, members []string
		createdBy, metadata   string
	}
	specs := []spec{
		{participants: []string{alice, bob}, createdBy: carol, metadata: `{"team":"red","n":"1"}`},
		{participants: []string{bob}, members: []string{alice}, metadata: `{"team":"blue","a.b":"dot","q\"k":"quote"}`},
		{participants: []string{carol}, createdBy: alice, metadata: `{"team":"red","n":1}`},
		{participants: []string{bob}, metadata: `{"nested":{"team":"red"},"team":["red"]}`},
		{participants: []string{}, createdBy: bob},
	}
	ids := make([]string, len(specs))
	for i, sp := range specs {
		ids[i] = fmt.Sprintf("%s-%d", tag, i)
		at := parley.NewTime(t0.Add(time.Duration(i) * time.Second))
		c := parley.Conversation{ID: ids[i], Epoch: "ep", Title: tag, Participants: sp.participants, Members: sp.members, CreatedBy: sp.createdBy,
			TurnPolicy: parley.PolicyFree, MessageFormat: "v2", CreatedAt: at}
		if sp.metadata != "" {
			c.Metadata = json.RawMessage(sp.metadata)
		}
		members := append(append([]string{}, sp.participants...), sp.members...)
		if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: members, Events: []parley.Event{eventAt(ids[i], 1, at)}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		mine[ids[i]] = true
	}
	md := func(kv ...string) []store.MetadataFilter {
		var f []store.MetadataFilter
		for i := 0; i < len(kv); i += 2 {
			f = append(f, store.MetadataFilter{Key: kv[i], Value: kv[i+1]})
		}
		return f
	}
	for _, c := range []struct {
		name string
		p    store.ListConversationsParams
		want []int // most recent first
	}{
		{"participant", store.ListConversationsParams{Participant: bob}, []int{3, 1, 0}},
		{"participant, paged", store.ListConversationsParams{Participant: bob, Limit: 1}, []int{3, 1, 0}},
		{"participant not a member", store.ListConversationsParams{Participant: alice}, []int{0}},
		{"involves", store.ListConversationsParams{Involves: alice}, []int{2, 1, 0}},
		{"involves, paged", store.ListConversationsParams{Involves: bob, Limit: 1}, []int{4, 3, 1, 0}},
		{"metadata", store.ListConversationsParams{Metadata: md("team", "red")}, []int{2, 0}},
		{"metadata is a string", store.ListConversationsParams{Metadata: md("n", "1")}, []int{0}},
		{"metadata two keys", store.ListConversationsParams{Metadata: md("team", "red", "n", "1")}, []int{0}},
		{"metadata key with a dot", store.ListConversationsParams{Metadata: md("a.b", "dot")}, []int{1}},
		{"metadata key with a quote", store.ListConversationsParams{Metadata: md(`q"k`, "quote")}, []int{1}},
		{"metadata no match", store.ListConversationsParams{Metadata: md("team", "Red")}, nil},
		{"metadata and participant", store.ListConversationsParams{Metadata: md("team", "red"), Participant: carol}, []int{2}},
		{"involves and participant", store.ListConversationsParams{Involves: alice, Participant: bob}, []int{1, 0}},
		{"involves and member", store.ListConversationsParams{Involves: bob, Member: alice}, []int{1, 0}},
		{"member restricts whatever the filters", store.ListConversationsParams{Member: carol, Participant: bob}, nil},
		{"all and title", store.ListConversationsParams{Title: tag, Involves: alice, Participant: bob, Metadata: md("team", "blue"), Limit: 1}, []int{1}},
	} {
		var want []string
		for _, i := range c.want {
			want = append(want, ids[i])
		}
		if got := walkList(t, s, c.p, mine); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", c.name, got, want)
		}
	}
}

// testListFiltersBounded: filters past their bounds are refused with
// EINVALIDVALUE.
func testListFiltersBounded(t *testing.T, s store.Store) {
	long := strings.Repeat("x", store.MaxFilterValue+1)
	for name, p := range map[string]store.ListConversationsParams{
		"five metadata":       {Metadata: make([]store.MetadataFilter, store.MaxMetadataFilters+1)},
		"empty key":           {Metadata: []store.MetadataFilter{{Key: "", Value: "v"}}},
		"long key":            {Metadata: []store.MetadataFilter{{Key: strings.Repeat("k", store.MaxMetadataKey+1), Value: "v"}}},
		"long value":          {Metadata: []store.MetadataFilter{{Key: "k", Value: long}}},
		"long participant":    {Participant: long},
		"NUL in involves":     {Involves: "a\x00b"},
		"invalid UTF-8 value": {Metadata: []store.MetadataFilter{{Key: "k", Value: "\xff"}}},
	} {
		_, _, err := s.ListConversations(ctx(t), p)
		if parley.ErrorCode(err) != parley.EINVALIDVALUE {
			t.Errorf("%s: %v, want %s", name, err, parley.EINVALIDVALUE)
		}
	}
}
