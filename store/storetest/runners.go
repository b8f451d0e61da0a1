package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/store"
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
