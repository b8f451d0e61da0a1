package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testRunnerLeases: a node's record of its runners replaces its last one,
// leaves other nodes' alone, and lapses when its lease ends.
func testRunnerLeases(t *testing.T, s store.Store) {
	conv := uuid.NewString()
	nodeA, nodeB := "a-"+uuid.NewString(), "b-"+uuid.NewString()
	renew := func(node string, until parley.Time, agents ...string) {
		t.Helper()
		var rs []store.RunnerLease
		for _, a := range agents {
			rs = append(rs, store.RunnerLease{ConversationID: conv, AgentID: a})
		}
		if err := s.RenewRunners(ctx(t), store.RenewRunnersParams{Node: node, Runners: rs, Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	live := func(now parley.Time) string {
		t.Helper()
		rs, err := s.LiveRunners(ctx(t), store.LiveRunnersParams{ConversationID: conv, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			if r.ConversationID == store.AllConversations {
				continue // another test's agent-wide runner
			}
			if r.ConversationID != conv {
				t.Fatalf("asked for %s, got a runner of %s", conv, r.ConversationID)
			}
			node := "A"
			if r.Node == nodeB {
				node = "B"
			}
			out = append(out, r.AgentID+"@"+node)
		}
		return fmt.Sprint(out)
	}
	soon, later := parley.NewTime(t0.Add(15*time.Second)), parley.NewTime(t0.Add(time.Minute))
	renew(nodeA, soon, "bob", "alice")
	renew(nodeB, later, "alice")
	if got := live(t0); got != "[alice@A alice@B bob@A]" {
		t.Fatalf("live at t0: %s", got)
	}
	// A's lease lapses (it died); B's holds.
	if got := live(soon); got != "[alice@B]" {
		t.Fatalf("live once A's lease ended: %s", got)
	}
	// A renews without bob: bob is gone at once, alice lives on.
	renew(nodeA, later, "alice")
	if got := live(t0); got != "[alice@A alice@B]" {
		t.Fatalf("after A's renewal without bob: %s", got)
	}
	renew(nodeB, later)
	if got := live(t0); got != "[alice@A]" {
		t.Fatalf("after B's runners left: %s", got)
	}
	all, err := s.LiveRunners(ctx(t), store.LiveRunnersParams{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range all {
		found = found || (r.ConversationID == conv && r.Node == nodeA && r.AgentID == "alice")
	}
	if !found {
		t.Fatalf("all live runners %v lack alice@A", all)
	}
}

// testAgentWideLeases: an agent-wide runner's lease (AllConversations) is
// live for every conversation asked about.
func testAgentWideLeases(t *testing.T, s store.Store) {
	conv, node, agent := uuid.NewString(), "n-"+uuid.NewString(), "wide-"+uuid.NewString()
	err := s.RenewRunners(ctx(t), store.RenewRunnersParams{Node: node, Until: parley.NewTime(t0.Add(time.Minute)),
		Runners: []store.RunnerLease{{ConversationID: store.AllConversations, AgentID: agent}}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.LiveRunners(ctx(t), store.LiveRunnersParams{ConversationID: conv, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rs {
		found = found || (r.AgentID == agent && r.Node == node && r.ConversationID == store.AllConversations)
	}
	if !found {
		t.Fatalf("live runners of %s: %v, want %s's agent-wide lease", conv, rs, agent)
	}
}

// testQueuedFor: the conversations an agent takes part in whose queue is
// not empty, paged by id; others' conversations and empty queues are left
// out.
func testQueuedFor(t *testing.T, s store.Store) {
	agent := "asked-" + uuid.NewString()
	mk := func(members []string, queue string) string {
		t.Helper()
		id := uuid.NewString()
		c := parley.Conversation{ID: id, Epoch: "ep", Participants: members, CreatedAt: t0}
		if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Members: members,
			Events: []parley.Event{event(id, 1, "")}, State: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if queue != "" {
			if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "")},
				State: []byte(`{}`), Queue: []byte(queue)}); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	var want []string
	for range 3 {
		want = append(want, mk([]string{agent, "other"}, `[{"id":"p"}]`))
	}
	mk([]string{agent}, `[]`)                    // answered: empty queue
	mk([]string{agent}, "")                      // never queued
	mk([]string{"someone-else"}, `[{"id":"p"}]`) // not the agent's
	slices.Sort(want)
	var got []string
	for after := ""; ; {
		page, err := s.QueuedFor(ctx(t), store.QueuedForParams{AgentID: agent, After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got, after = append(got, page...), page[len(page)-1]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("QueuedFor = %v, want %v", got, want)
	}
}
