package conv

import (
	"testing"

	"github.com/parleyhq/parley"
)

// TestAskedAndPromptUnderWay: a question is found in the queue once its
// text is there, with its asker and the position after its first part;
// the prompt under way is the one dispatched, else the first waiting.
func TestAskedAndPromptUnderWay(t *testing.T) {
	var st State
	st.Conversation.Epoch = "e"
	if p := st.PromptUnderWay(); p != nil {
		t.Fatalf("empty queue: %+v under way", p)
	}
	st.Queue = []parley.QueuedPrompt{{ID: "p1", AgentID: "alice", Parts: []int64{4, 5}}, {ID: "p2", AgentID: "bob", Parts: []int64{7}}, {ID: "p3", AgentID: "bob"}}
	if asker, from, ok := st.Asked("p2"); !ok || asker != "bob" || from != (parley.Position{Seq: 7, Epoch: "e"}) {
		t.Fatalf("p2: %q %+v %v", asker, from, ok)
	}
	if _, _, ok := st.Asked("p3"); ok {
		t.Fatal("p3 has no text yet, but is found")
	}
	if _, _, ok := st.Asked("p4"); ok {
		t.Fatal("p4 is not queued, but is found")
	}
	if p := st.PromptUnderWay(); p == nil || p.ID != "p1" {
		t.Fatalf("none dispatched: %+v under way, want p1", p)
	}
	st.Queue[1].Runner = "r"
	if p := st.PromptUnderWay(); p == nil || p.ID != "p2" {
		t.Fatalf("p2 dispatched: %+v under way", p)
	}
}
