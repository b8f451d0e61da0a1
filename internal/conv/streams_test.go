package conv_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/internal/conv"
)

// TestStreamsAreValues: Streams change by copy, whatever order the streams
// came in, and read and write as the JSON object a map of them makes
// (the stored snapshot's form before they were a list).
func TestStreamsAreValues(t *testing.T) {
	var s conv.Streams
	a := s.With("b", conv.Stream{AgentID: "x", Chunks: 1})
	b := a.With("a", conv.Stream{AgentID: "y", Turn: 2}).With("c", conv.Stream{AgentID: "z"})
	c := b.With("b", conv.Stream{AgentID: "x", Chunks: 2})
	if s.Len() != 0 || a.Len() != 1 || b.Len() != 3 || c.Len() != 3 {
		t.Fatalf("lengths %d %d %d %d, want 0 1 3 3", s.Len(), a.Len(), b.Len(), c.Len())
	}
	if st, _ := b.Get("b"); st.Chunks != 1 {
		t.Fatalf("With changed the Streams it was called on: %+v", st)
	}
	if st, ok := c.Get("b"); !ok || st.Chunks != 2 {
		t.Fatalf("b in c: %+v, %v", st, ok)
	}
	if _, ok := c.Get("d"); ok {
		t.Fatal("found a stream never added")
	}
	other := s.With("c", conv.Stream{AgentID: "z"}).With("b", conv.Stream{AgentID: "x", Chunks: 2}).With("a", conv.Stream{AgentID: "y", Turn: 2})
	if !reflect.DeepEqual(c, other) {
		t.Fatalf("the same streams added in another order are not alike: %+v, %+v", c, other)
	}
	d := c.Without("a", "c", "nope")
	if c.Len() != 3 || d.Len() != 1 || !reflect.DeepEqual(d.Without("b"), conv.Streams{}) {
		t.Fatalf("Without: c %d, d %d, d without b %+v", c.Len(), d.Len(), d.Without("b"))
	}
	var ids []string
	for id := range c.All() {
		ids = append(ids, id)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b", "c"}) {
		t.Fatalf("All yields %v", ids)
	}

	asMap := map[string]conv.Stream{}
	for id, st := range c.All() {
		asMap[id] = st
	}
	want, _ := json.Marshal(asMap)
	got, err := json.Marshal(c)
	if err != nil || string(got) != string(want) {
		t.Fatalf("JSON %s (%v), want the map's %s", got, err, want)
	}
	var back conv.Streams
	if err := json.Unmarshal(want, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("read back %+v (%v), want %+v", back, err, c)
	}
	var fromMap map[string]conv.Stream
	if err := json.Unmarshal(got, &fromMap); err != nil || !maps.Equal(fromMap, asMap) {
		t.Fatalf("a map reads %+v (%v)", fromMap, err)
	}
	st, _ := json.Marshal(conv.State{})
	if string(st) != `{"lastSeq":0,"lastAt":null,"lastTurn":0}` {
		t.Fatalf("a state without streams writes %s", st)
	}
	if err := json.Unmarshal([]byte(`null`), &back); err != nil || back.Len() != 0 {
		t.Fatalf("null reads as %+v, %v", back, err)
	}
}
