package storetest

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

// streamLog writes a log of two streamed messages, r1 and r2, interleaved,
// and a stream chunk of no message (v1), into a new conversation:
//
//	1 created · 2 message r1 · 3 chunk r1 · 4 chunk r1 · 5 message r2 · 6 chunk r2 ·
//	7 chunk r1 · 8 part.updated r1 · 9 chunk r1 · 10 message.updated r1 (ended at end1) ·
//	11 chunk r2 · 12 chunk of no message
//
// r2 still streams. It returns the conversation and its events as written.
func streamLog(t *testing.T, s store.Store, end1 time.Time) (string, []parley.Event) {
	t.Helper()
	id := newConversation(t, s)
	at := func(seq int64) parley.Time { return parley.NewTime(t0.Add(time.Duration(seq) * time.Second)) }
	ev := func(seq int64, typ string, data any) parley.Event {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		return parley.Event{ConversationID: id, Seq: seq, Type: typ, Turn: 1, TurnID: "q1", AgentID: "a", Finality: parley.FinalityNone, Time: at(seq), Data: b}
	}
	chunk := func(seq int64, mid, text string) parley.Event {
		return ev(seq, parley.EventChunk, parley.Chunk{MessageID: mid, Content: text})
	}
	r1 := &parley.Message{ID: "r1", ConversationID: id, Seq: 2, Role: parley.RoleAssistant, AgentID: "a", Status: parley.StatusStreaming,
		Turn: 1, TurnID: "q1", CreatedAt: at(2), UpdatedAt: at(2)}
	r2 := &parley.Message{ID: "r2", ConversationID: id, Seq: 5, Role: parley.RoleAssistant, AgentID: "a", Status: parley.StatusStreaming,
		Turn: 1, TurnID: "q1", CreatedAt: at(5), UpdatedAt: at(5)}
	tool := parley.Part{Type: parley.PartToolCall, CallID: "c1", ToolName: "calc", Status: parley.ToolCompleted}
	done := *r1
	done.Parts = []parley.Part{{Type: parley.PartText, Text: "ab"}, tool, {Type: parley.PartText, Text: "cd"}}
	done.Content, done.Status, done.UpdatedSeq, done.UpdatedAt = "abcd", parley.StatusComplete, 10, parley.NewTime(end1)
	events := []parley.Event{
		ev(2, parley.EventMessage, r1), chunk(3, "r1", "a"), chunk(4, "r1", "b"), ev(5, parley.EventMessage, r2), chunk(6, "r2", "x"),
		chunk(7, "r1", "c"), ev(8, parley.EventPartUpdated, parley.PartUpdate{MessageID: "r1", Part: tool}), chunk(9, "r1", "d"),
		ev(10, parley.EventMessageUpdated, &done), chunk(11, "r2", "y"), chunk(12, "", "v1 text"),
	}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: events, Messages: []*parley.Message{&done, r2}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, Limit: 100})
	if err != nil || len(all) != 12 {
		t.Fatalf("read %d events, err %v", len(all), err)
	}
	return id, all
}

// compact runs one Compact of conversation id as of now with the retention
// given, and fails the test on an error.
func compact(t *testing.T, s store.Store, id string, now time.Time, retention time.Duration, maxRows int) store.CompactResult {
	t.Helper()
	res, err := s.Compact(ctx(t), store.CompactParams{ConversationID: id, Now: parley.NewTime(now), Before: parley.NewTime(now.Add(-retention)), MaxRows: maxRows})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// wantLog reads the log from every position with pages of several sizes
// and checks that each read returns every seq after the position once, in
// order: a tombstone for each seq of tombstones, every other event as
// written.
func wantLog(t *testing.T, s store.Store, id string, written []parley.Event, tombstones ...int64) {
	t.Helper()
	dead := map[int64]bool{}
	for _, seq := range tombstones {
		dead[seq] = true
	}
	last := written[len(written)-1].Seq
	for after := int64(0); after <= last; after++ {
		for _, limit := range []int{1, 2, 3, 1000} {
			for _, maxBytes := range []int{0, 1, 40} {
				next := after
				for reads := 0; next < last; reads++ {
					page, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: id, After: next, Limit: limit, MaxBytes: maxBytes})
					if err != nil {
						t.Fatal(err)
					}
					if len(page) == 0 || len(page) > limit || reads > int(last) {
						t.Fatalf("after %d (read from %d, limit %d, %d bytes): %d events", after, next, limit, maxBytes, len(page))
					}
					for _, e := range page {
						next++
						w := written[next-1]
						switch {
						case e.Seq != next:
							t.Fatalf("after %d (limit %d): seq %d where %d comes next", after, limit, e.Seq, next)
						case dead[e.Seq] && (e.Type != parley.EventCompacted || string(e.Data) != `{}` || e.ConversationID != id || e.Turn != 0 || e.Finality != parley.FinalityNone):
							t.Fatalf("seq %d is not a tombstone: %+v", e.Seq, e)
						case !dead[e.Seq] && (e.Type != w.Type || string(e.Data) != string(w.Data) || !e.Time.Equal(w.Time.Time) || e.Turn != w.Turn || e.AgentID != w.AgentID):
							t.Fatalf("seq %d changed: %+v, want %+v", e.Seq, e, w)
						}
					}
				}
			}
		}
	}
}

// cursorOf returns the compaction cursor of conversation id.
func cursorOf(t *testing.T, s store.Store, id string) store.CompactionCursor {
	t.Helper()
	cs, err := s.CompactionCursors(ctx(t), store.CompactionCursorsParams{After: id[:len(id)-1], Limit: 1})
	if err != nil || len(cs) != 1 || cs[0].ConversationID != id {
		t.Fatalf("cursors %+v, err %v", cs, err)
	}
	return cs[0]
}

func testCompactSpans(t *testing.T, s store.Store) {
	end1 := t0.Add(10 * time.Second)
	id, written := streamLog(t, s, end1)
	if c := cursorOf(t, s, id); c.LastSeq != 12 || c.Through != 0 || !c.Due.IsZero() || !c.Pending(t0.Time) {
		t.Fatalf("a conversation never compacted: %+v", c)
	}
	day := 24 * time.Hour

	// r1 ended, but within the retention: nothing changes, and compaction
	// is due again when it may.
	res := compact(t, s, id, end1.Add(time.Hour), day, 0)
	if res.Compacted != 0 || res.Removed != 0 || res.Through != 2 || res.More || !res.Due.Equal(end1.Add(day)) {
		t.Fatalf("within the retention: %+v", res)
	}
	wantLog(t, s, id, written)

	// Past it: r1's deltas become two spans (3-4 and 7-9); r2 still
	// streams, so the cursor stays before its first chunk (6). r1's
	// message.updated (10) was stored as a reference to its row when it
	// was written: compaction has none to make.
	now := end1.Add(2 * day)
	res = compact(t, s, id, now, day, 0)
	if res.Compacted != 5 || res.Removed != 3 || res.Referenced != 0 || res.Through != 5 || res.More || !res.Due.Equal(now.Add(day)) {
		t.Fatalf("past the retention: %+v", res)
	}
	wantLog(t, s, id, written, 3, 4, 7, 8, 9)
	if c := cursorOf(t, s, id); c.Through != 5 || !c.Due.Equal(now.Add(day)) || c.Pending(now) || !c.Pending(now.Add(day)) {
		t.Fatalf("cursor %+v", c)
	}
	// Again at once: nothing more, and nothing written twice.
	if res := compact(t, s, id, now, day, 0); res.Compacted != 0 || res.Removed != 0 || res.Referenced != 0 || res.Through != 5 {
		t.Fatalf("again: %+v", res)
	}
	wantLog(t, s, id, written, 3, 4, 7, 8, 9)

	// r2 ends (13): its chunk 6 joins the span 7-9, chunk 11 becomes one of
	// its own; the chunk of no message (12) is kept.
	r2 := &parley.Message{ID: "r2", ConversationID: id, Seq: 5, Role: parley.RoleAssistant, AgentID: "a", Parts: []parley.Part{{Type: parley.PartText, Text: "xy"}},
		Content: "xy", Status: parley.StatusCanceled, Turn: 1, TurnID: "q1", UpdatedSeq: 13, UpdatedAt: parley.NewTime(now)}
	data, _ := json.Marshal(r2)
	ended := parley.Event{ConversationID: id, Seq: 13, Type: parley.EventMessageUpdated, Turn: 1, TurnID: "q1", AgentID: "a", Finality: parley.FinalityNone, Time: parley.NewTime(now), Data: data}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 12, Events: []parley.Event{ended}, Messages: []*parley.Message{r2}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	written = append(written, ended)
	later := now.Add(2 * day)
	res = compact(t, s, id, later, day, 0)
	if res.Compacted != 2 || res.Removed != 1 || res.Referenced != 0 || res.Through != 13 || res.More || !res.Due.Equal(later.Add(day/8)) {
		t.Fatalf("once r2 ended: %+v", res)
	}
	wantLog(t, s, id, written, 3, 4, 6, 7, 8, 9, 11)
	if c := cursorOf(t, s, id); c.LastSeq != 13 || c.Through != 13 || c.Pending(later.Add(day)) {
		t.Fatalf("cursor when all is done: %+v", c)
	}
	// Messages are untouched.
	ms, err := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 10})
	if err != nil || len(ms) != 2 || ms[0].Content != "abcd" || ms[1].Content != "xy" {
		t.Fatalf("messages after compaction: %v, err %v", ms, err)
	}
}

// testCompactInSteps: a bound on the rows read makes several calls, each
// saying whether there is more, until one meets an event that may yet
// become compactable (r2's, which streams): the cursor waits there, and
// what lies past the rows read waits with it.
func testCompactInSteps(t *testing.T, s store.Store) {
	end1 := t0.Add(10 * time.Second)
	id, written := streamLog(t, s, end1)
	now, day := end1.Add(2*24*time.Hour), 24*time.Hour
	var through []int64
	for range 10 {
		res := compact(t, s, id, now, day, 2)
		through = append(through, res.Through)
		if !res.More {
			break
		}
	}
	if fmt.Sprint(through) != "[2 4 5]" {
		t.Fatalf("cursor after each step: %v", through)
	}
	wantLog(t, s, id, written, 3, 4)
	// With room enough, the rest after the cursor goes.
	compact(t, s, id, now, day, 0)
	wantLog(t, s, id, written, 3, 4, 7, 8, 9)
}

// testCompactRemovedMessages: the deltas of a message whose row is gone (a
// revert) are compacted once they are older than the retention.
func testCompactRemovedMessages(t *testing.T, s store.Store) {
	end1 := t0.Add(10 * time.Second)
	id, written := streamLog(t, s, end1)
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 12, Events: []parley.Event{event(id, 13, "a")}, RemoveMessages: []string{"r2"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	written = append(written, event(id, 13, "a"))
	day := 24 * time.Hour
	// r2's chunks are at t0+6s and t0+11s: with the cutoff between them,
	// the first goes, the second waits.
	// r1 ended at end1, after the cutoff: it waits too.
	res := compact(t, s, id, t0.Add(8*time.Second+day), day, 0)
	if res.Compacted != 1 || res.Through != 2 || !res.Due.Equal(end1.Add(day)) {
		t.Fatalf("with the cutoff between r2's chunks: %+v", res)
	}
	wantLog(t, s, id, written, 6)
	res = compact(t, s, id, end1.Add(2*day), day, 0)
	if res.Through != 13 {
		t.Fatalf("later: %+v", res)
	}
	wantLog(t, s, id, written, 3, 4, 6, 7, 8, 9, 11)
}

// testCompactRefersToRows: of the events that wrote an ended message, the
// one whose data is the message's row is stored as a reference to it: at
// once when the row is written with it (r1's message.updated, the message
// event of w1, posted whole), or by compaction once the message is past
// the retention when the row was written after it (l1's, as in a log
// written before references were made at write time). Every such event
// reads as written. An event whose data is not the row's (x1's: a row
// written from other data), or that did not write the row last (r1's first
// message event), is left as it is. A revert puts the row's data back into
// its event before the row goes: the log still reads as written.
func testCompactRefersToRows(t *testing.T, s store.Store) {
	end1 := t0.Add(10 * time.Second)
	id, written := streamLog(t, s, end1)
	whole := said(id, "w1", "b", "posted <whole> & \"quoted\"", parley.NewTime(end1))
	whole.Seq, whole.Metadata = 13, json.RawMessage(`{"k":"<v>"}`)
	other := said(id, "x1", "b", "the row's text", parley.NewTime(end1))
	other.Seq = 14
	otherEvent := *other
	otherEvent.Content = "what the event said"
	late := said(id, "l1", "b", "a row written after its event", parley.NewTime(end1))
	late.Seq = 15
	posted := func(m *parley.Message) parley.Event {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return parley.Event{ConversationID: id, Seq: m.Seq, Type: parley.EventMessage, Turn: 2, TurnID: "q2", AgentID: "b",
			Finality: parley.FinalityNone, Time: parley.NewTime(end1), Data: data}
	}
	events := []parley.Event{posted(whole), posted(&otherEvent), posted(late)}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 12, Events: events, Messages: []*parley.Message{whole, other}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	lateRow := event(id, 16, "b")
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 15, Events: []parley.Event{lateRow}, Messages: []*parley.Message{late}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	written = append(written, append(events, lateRow)...)
	wantLog(t, s, id, written)
	day := 24 * time.Hour
	now := end1.Add(2 * day)
	if res := compact(t, s, id, now, day, 0); res.Compacted != 5 || res.Referenced != 1 {
		t.Fatalf("past the retention: %+v", res)
	}
	wantLog(t, s, id, written, 3, 4, 7, 8, 9)
	if res := compact(t, s, id, now, day, 0); res.Referenced != 0 {
		t.Fatalf("again: %+v", res)
	}

	// Reverted: r1, w1 and l1 go, their events stay as written.
	removed := event(id, 17, "a")
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 16, Events: []parley.Event{removed}, RemoveMessages: []string{"r1", "w1", "l1"}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	written = append(written, removed)
	wantLog(t, s, id, written, 3, 4, 7, 8, 9)
	if ms, err := s.ListMessages(ctx(t), store.ListMessagesParams{ConversationID: id, Limit: 10}); err != nil || len(ms) != 2 || ms[0].ID != "r2" || ms[1].ID != "x1" {
		t.Fatalf("messages after the revert: %v, err %v", ms, err)
	}
	if res := compact(t, s, id, now.Add(2*day), day, 0); res.Referenced != 0 {
		t.Fatalf("after the revert: %+v", res)
	}
	wantLog(t, s, id, written, 3, 4, 7, 8, 9)
}

// testCompactRefusals: unknown conversations and imports in progress are
// not compacted; CompactionCursors leaves imports out.
func testCompactRefusals(t *testing.T, s store.Store) {
	_, err := s.Compact(ctx(t), store.CompactParams{ConversationID: uuid.NewString(), Now: t0, Before: t0})
	wantCode(t, err, parley.ENOTFOUND)
	im := newImport(t, s, "owner-"+uuid.NewString(), time.Hour)
	_, err = s.Compact(ctx(t), store.CompactParams{ConversationID: im, Now: t0, Before: t0})
	wantCode(t, err, parley.ENOTFOUND)
	cs, err := s.CompactionCursors(ctx(t), store.CompactionCursorsParams{After: im[:len(im)-1], Limit: 1})
	if err != nil || len(cs) == 1 && cs[0].ConversationID == im {
		t.Fatalf("an import in progress is listed: %+v, err %v", cs, err)
	}
}

// testRenewEpochs gives every conversation a new epoch, in its record and
// its conversation.created event, and a compaction cursor of the old epoch
// counts for nothing. It changes every conversation, so it runs alone.
func testRenewEpochs(t *testing.T, s store.Store) {
	end1 := t0.Add(10 * time.Second)
	id, _ := streamLog(t, s, end1)
	other := uuid.NewString()
	created := event(other, 1, "")
	created.Type = parley.EventConversationCreated
	createdData := `{"id":"` + other + `","epoch": "ep","title":"t","participants":[],"metadata":{"epoch":"x"},"createdAt":"2026-11-22T12:00:00.123Z"}`
	created.Data = json.RawMessage(createdData)
	c := parley.Conversation{ID: other, Epoch: "ep", Title: "other", Participants: []string{}, CreatedAt: t0}
	if err := s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{created}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	compact(t, s, id, end1.Add(48*time.Hour), 24*time.Hour, 0)
	if c := cursorOf(t, s, id); c.Through != 5 {
		t.Fatalf("cursor before: %+v", c)
	}
	n := 0
	renewed, err := s.RenewEpochs(ctx(t), store.RenewEpochsParams{Epoch: func() string { n++; return fmt.Sprintf("e%07d", n) }})
	if err != nil || renewed < 2 || renewed != n {
		t.Fatalf("renewed %d (%d epochs made), err %v", renewed, n, err)
	}
	seen := map[string]bool{}
	for _, cid := range []string{id, other} {
		rec, err := s.GetConversation(ctx(t), cid)
		if err != nil {
			t.Fatal(err)
		}
		e := rec.Conversation.Epoch
		if !strings.HasPrefix(e, "e") || seen[e] || rec.Conversation.Title == "" {
			t.Fatalf("conversation %s after RenewEpochs: %+v", cid, rec.Conversation)
		}
		seen[e] = true
	}
	evs, err := s.ReadEvents(ctx(t), store.ReadEventsParams{ConversationID: other, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got parley.Conversation
	if err := json.Unmarshal(evs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	rec, _ := s.GetConversation(ctx(t), other)
	// Only the epoch changed, byte for byte.
	if got.Epoch != rec.Conversation.Epoch || string(evs[0].Data) != strings.Replace(createdData, `"ep"`, `"`+got.Epoch+`"`, 1) {
		t.Fatalf("conversation.created after RenewEpochs: %s (epoch %q)", evs[0].Data, rec.Conversation.Epoch)
	}
	if c := cursorOf(t, s, id); c.Through != 0 || !c.Due.IsZero() {
		t.Fatalf("a cursor of the old epoch still counts: %+v", c)
	}
}
