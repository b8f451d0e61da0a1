package engine_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/retention"
)

// streamedConversation writes, through the engine, a conversation whose
// streamed messages end (r1, with a tool call between its text parts, and
// r2, streamed interleaved with r3), are reverted (r4), or still stream
// (r3), with posted messages between them. It returns its id.
func streamedConversation(t *testing.T, b *bundle) string {
	t.Helper()
	id := b.conversation(t, parley.PolicyFree)
	bot := conv.Actor{AgentID: "bot"}
	start := func(mid string) {
		if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: mid, Role: parley.RoleAssistant, Streaming: true}); err != nil {
			t.Fatal(err)
		}
	}
	delta := func(mid string, n int) {
		for i := range n {
			if _, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: mid, Delta: fmt.Sprintf("%s-%d ", mid, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tool := func(mid string, status string) {
		if _, err := b.eng.StreamTool(b.ctx, id, conv.StreamTool{Actor: bot, MessageID: mid, Tool: conv.ToolUpdate{CallID: "c-" + mid, ToolName: "calc", Status: status,
			Args: json.RawMessage(`{"x":6}`), Result: json.RawMessage(`42`)}}); err != nil {
			t.Fatal(err)
		}
	}
	end := func(mid string, fin parley.Finality) {
		if _, err := b.eng.FinalizeMessage(b.ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: mid, Reason: parley.FinishEndTurn, Finality: fin}); err != nil {
			t.Fatal(err)
		}
	}
	b.say(t, id, "human", "question", parley.FinalityTurn)
	start("r1")
	delta("r1", 70) // past a checkpoint of the row
	tool("r1", parley.ToolRunning)
	tool("r1", parley.ToolCompleted)
	delta("r1", 5)
	end("r1", parley.FinalityTurn)
	b.say(t, id, "human", "and then?", parley.FinalityTurn)
	start("r2")
	start("r3")
	for range 4 {
		delta("r2", 3)
		delta("r3", 2)
	}
	end("r2", parley.FinalityNone)
	start("r4")
	delta("r4", 6)
	if _, err := b.eng.Revert(b.ctx, id, bot, "r4"); err != nil {
		t.Fatal(err)
	}
	delta("r3", 3) // r3 streams on
	return id
}

// foldUpTo folds the events with seqs 1 to upTo: what a client holds at
// that position.
func foldUpTo(t *testing.T, events []parley.Event, upTo int64) *client.Fold {
	t.Helper()
	f := &client.Fold{}
	for _, e := range events {
		if e.Seq > upTo {
			break
		}
		if err := f.ApplyEvent(e); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// resume folds into f every event a subscriber that resumes from position
// from gets, up to the log's head, and fails unless it is exactly the seqs
// after from.
func resume(t *testing.T, b *bundle, id string, f *client.Fold, from parley.Position, head int64) {
	t.Helper()
	sub, err := b.eng.Subscribe(b.ctx, id, &from)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !sub.Init.Recovered || sub.Init.Position.Seq != from.Seq {
		t.Fatalf("resume from %d: init recovered %v at %d", from.Seq, sub.Init.Recovered, sub.Init.Position.Seq)
	}
	want := from.Seq + 1
	timeout := time.After(10 * time.Second)
	for want <= head {
		select {
		case it, ok := <-sub.C:
			if !ok {
				t.Fatalf("resume from %d: the stream ended at %d of %d", from.Seq, want-1, head)
			}
			if it.Event == nil {
				continue
			}
			if it.Event.Seq != want {
				t.Fatalf("resume from %d: seq %d where %d comes next", from.Seq, it.Event.Seq, want)
			}
			if err := f.ApplyEvent(*it.Event); err != nil {
				t.Fatal(err)
			}
			want++
		case <-timeout:
			t.Fatalf("resume from %d: stuck at %d of %d", from.Seq, want-1, head)
		}
	}
}

// shown is the text a fold shows, message by message.
func shown(ms []*parley.Message) string {
	var out []string
	for _, m := range ms {
		parts, _ := json.Marshal(m.Parts)
		out = append(out, fmt.Sprintf("%s %s %q %s", m.ID, m.Status, m.Content, parts))
	}
	return fmt.Sprint(out)
}

// TestResumeAcrossCompactedSpans compacts the chunk events of the
// messages that ended (and of one reverted), then resumes a client from
// every position of the log as it was before, each holding what it had
// folded up to there: from before a message's stream, inside it, at its
// tool call, just before its end, after it, among the deltas of two
// messages streamed together, and at the head. Every one folds to exactly
// the stored messages: no text lost, none twice. So do a reader from the
// start and a fresh snapshot, and the message still streaming keeps every
// delta.
func TestResumeAcrossCompactedSpans(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := streamedConversation(t, b)
	before := b.events(t, id)
	head := before[len(before)-1].Seq
	want := shown(foldUpTo(t, before, head).Messages())

	// Compact as if two days had passed, with a day of retention.
	sw := retention.New(b.db, retention.Options{Retention: 24 * time.Hour, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	var compacted int64
	for range 100 {
		st, err := sw.Pass(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		compacted += st.Events
		if st.Round && st.Events == 0 {
			break
		}
	}
	after := b.events(t, id)
	if len(after) != len(before) {
		t.Fatalf("%d events before compaction, %d after: seqs must stay dense", len(before), len(after))
	}
	dead := map[int64]bool{}
	for i, e := range after {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Type == parley.EventCompacted {
			dead[e.Seq] = true
		} else if string(e.Data) != string(before[i].Data) || e.Type != before[i].Type {
			t.Fatalf("seq %d changed: %s %s, was %s %s", e.Seq, e.Type, e.Data, before[i].Type, before[i].Data)
		}
	}
	if compacted == 0 || int64(len(dead)) != compacted {
		t.Fatalf("%d events compacted, %d tombstones", compacted, len(dead))
	}
	// Of what was compacted: r1's, r2's and r4's deltas, never r3's.
	for _, e := range before {
		if e.Type != parley.EventChunk && e.Type != parley.EventPartUpdated {
			if dead[e.Seq] {
				t.Fatalf("seq %d (%s) was compacted", e.Seq, e.Type)
			}
			continue
		}
		var d struct{ MessageID string }
		_ = json.Unmarshal(e.Data, &d)
		if dead[e.Seq] != (d.MessageID != "r3") {
			t.Fatalf("seq %d, a delta of %s: compacted %v", e.Seq, d.MessageID, dead[e.Seq])
		}
	}

	// The positions named are among every position tried.
	first := func(typ, mid string) int64 {
		for _, e := range before {
			var d struct {
				ID        string
				MessageID string
			}
			_ = json.Unmarshal(e.Data, &d)
			if e.Type == typ && (d.ID == mid || d.MessageID == mid) {
				return e.Seq
			}
		}
		t.Fatalf("no %s of %s", typ, mid)
		return 0
	}
	named := []struct {
		name string
		seq  int64
	}{
		{"before any stream", 1},
		{"at r1's creation", first(parley.EventMessage, "r1")},
		{"inside r1's first text", first(parley.EventChunk, "r1") + 10},
		{"at r1's tool call", first(parley.EventPartUpdated, "r1")},
		{"just before r1 ends", first(parley.EventMessageUpdated, "r1") - 1},
		{"after r1 ended", first(parley.EventMessageUpdated, "r1")},
		{"among r2's and r3's deltas", first(parley.EventChunk, "r3") + 2},
		{"inside the reverted r4", first(parley.EventChunk, "r4") + 2},
		{"at the head", head},
	}
	tried := map[int64]string{}
	for _, n := range named {
		if !dead[n.seq] && n.name != "before any stream" && n.name != "at the head" && n.name != "after r1 ended" && n.name != "at r1's creation" {
			t.Fatalf("%s (seq %d) is not inside a compacted span", n.name, n.seq)
		}
		tried[n.seq] = n.name
	}
	epoch := after[0].Data
	var c parley.Conversation
	_ = json.Unmarshal(epoch, &c)
	for seq := int64(0); seq <= head; seq++ {
		name := tried[seq]
		if name == "" {
			name = fmt.Sprintf("seq %d", seq)
		}
		t.Run(name, func(t *testing.T) {
			f := foldUpTo(t, before, seq)
			resume(t, b, id, f, parley.Position{Seq: seq, Epoch: c.Epoch}, head)
			if got := shown(f.Messages()); got != want {
				t.Fatalf("resumed from %d:\n got %s\nwant %s", seq, got, want)
			}
		})
	}

	// A reader from the start of the compacted log, and a fresh snapshot.
	if got := shown(foldUpTo(t, after, head).Messages()); got != want {
		t.Fatalf("read from the start:\n got %s\nwant %s", got, want)
	}
	sub, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := shown(sub.Init.Messages); got != want {
		t.Fatalf("snapshot:\n got %s\nwant %s", got, want)
	}
	// r3 goes on streaming after the compaction, and ends whole.
	bot := conv.Actor{AgentID: "bot"}
	if _, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r3", Delta: "end"}); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.FinalizeMessage(b.ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r3", Reason: parley.FinishEndTurn})
	if err != nil {
		t.Fatal(err)
	}
	if r3 := res.Message.Content; r3 != "r3-0 r3-1 r3-0 r3-1 r3-0 r3-1 r3-0 r3-1 r3-0 r3-1 r3-2 end" {
		t.Fatalf("r3 ends as %q", r3)
	}
	if !slices.ContainsFunc(b.events(t, id), func(e parley.Event) bool { return e.Type == parley.EventCompacted }) {
		t.Fatal("the tombstones are gone")
	}
}
