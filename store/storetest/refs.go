package storetest

import (
	"fmt"
	"testing"

	"github.com/parleyhq/parley/store"
)

// testMessageRefs: MessageRefs names the messages asked for by id (those
// that exist, in seq order) or a page of them after a seq, with who wrote
// each.
func testMessageRefs(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	m1, m2, m3 := message(id, "m1", 0, "", 0), message(id, "m2", 0, "", 0), message(id, "m3", 0, "", 0)
	m2.AgentID = "b"
	appendMessages(t, s, id, 1, m1, m2, m3)
	show := func(refs []store.MessageRef, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range refs {
			out = append(out, fmt.Sprintf("%s@%d:%s", r.ID, r.Seq, r.AgentID))
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		p    store.MessageRefsParams
		want string
	}{
		{store.MessageRefsParams{ConversationID: id, IDs: []string{"m3", "nope", "m1"}}, "[m1@2:a m3@4:a]"},
		{store.MessageRefsParams{ConversationID: id, IDs: []string{"nope"}}, "[]"},
		{store.MessageRefsParams{ConversationID: id, After: 2, Limit: 10}, "[m2@3:b m3@4:a]"},
		{store.MessageRefsParams{ConversationID: id, After: 0, Limit: 2}, "[m1@2:a m2@3:b]"},
		{store.MessageRefsParams{ConversationID: "another", After: 0, Limit: 2}, "[]"},
	} {
		if got := show(s.MessageRefs(ctx(t), c.p)); got != c.want {
			t.Errorf("MessageRefs(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
}
