package storetest

import (
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testReadSnapshot reads a conversation at one moment while it is written:
// the writes commit while the snapshot is open (a writer does not wait for
// it), and the snapshot's reads see none of them, its conversation, log and
// rows all as they were when it began, however many reads it makes.
func testReadSnapshot(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	last := appendMessages(t, s, id, 1, message(id, "kept", 0, "", 0), message(id, "changed", 0, "", 0), message(id, "removed", 0, "", 0))
	before := func(r store.Reader, when string) {
		t.Helper()
		rec, err := r.GetConversation(ctx(t), id)
		if err != nil || rec.LastSeq != last {
			t.Fatalf("%s: the snapshot's conversation is at %v (%v), want %d", when, rec, err, last)
		}
		events, err := r.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 100})
		if err != nil || len(events) != int(last) {
			t.Fatalf("%s: the snapshot's log holds %d events (%v), want %d", when, len(events), err, last)
		}
		ms, err := r.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, when+": the snapshot's messages", ms, "kept", "changed", "removed")
		if ms[1].Content != "changed" {
			t.Fatalf("%s: the snapshot shows the row rewritten after it began: %q", when, ms[1].Content)
		}
		raw, err := r.ListMessagesRaw(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 10})
		if err != nil || len(raw) != 3 {
			t.Fatalf("%s: the snapshot's raw rows: %d (%v), want 3", when, len(raw), err)
		}
		if m, err := r.GetMessage(ctx(t), id, "removed"); err != nil || m.ID != "removed" {
			t.Fatalf("%s: the snapshot lost a row removed after it began: %v %v", when, m, err)
		}
		if _, err := r.GetMessage(ctx(t), id, "added"); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("%s: the snapshot sees a row added after it began: %v", when, err)
		}
	}
	wrote := false
	err := s.ReadSnapshot(ctx(t), func(r store.Reader) error {
		before(r, "at first")
		changed := message(id, "changed", 0, "", 0)
		changed.Seq, changed.Content, changed.Parts = 3, "rewritten", []parley.Part{{Type: parley.PartText, Text: "rewritten"}}
		added := message(id, "added", last+1, "", 0)
		err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: last, Events: []parley.Event{event(id, last+1, "a")},
			Messages: []*parley.Message{changed, added}, RemoveMessages: []string{"removed"}, State: []byte(`{}`)})
		if err != nil {
			t.Fatalf("a write while a snapshot is read: %v", err)
		}
		wrote = true
		before(r, "after a write")
		return nil
	})
	if err != nil || !wrote {
		t.Fatalf("ReadSnapshot: %v (wrote %v)", err, wrote)
	}
	// Outside it, the write is there.
	if m, err := s.GetMessage(ctx(t), id, "changed"); err != nil || m.Content != "rewritten" {
		t.Fatalf("after the snapshot: %v %v", m, err)
	}
	if rec, err := s.GetConversation(ctx(t), id); err != nil || rec.LastSeq != last+1 {
		t.Fatalf("after the snapshot the head is %v (%v), want %d", rec, err, last+1)
	}
	// fn's error is ReadSnapshot's.
	if err := s.ReadSnapshot(ctx(t), func(r store.Reader) error {
		_, err := r.GetConversation(ctx(t), "no-such-conversation")
		return err
	}); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("ReadSnapshot of an unknown conversation: %v, want not_found", err)
	}
}
