package reads_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/teststore"
)

// textOf is the text of a message's text parts.
func textOf(m *parley.Message) string {
	var b bytes.Buffer
	for _, p := range m.Parts {
		if p.Type == parley.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// fixture is an engine on a new store with one conversation, where bot's
// answer "a" to alice's question "q" streams, and bot's "r" replies to
// "a".
type fixture struct {
	ctx  context.Context
	db   store.Store
	eng  *engine.Engine
	id   string
	want string // the text "a" streamed so far
	head int64  // the seq the conversation is at
}

// streaming makes a fixture.
func streaming(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	db := teststore.Open(t)
	eng := engine.New(db, engine.Options{})
	t.Cleanup(eng.Close)
	v, err := eng.CreateConversation(ctx, parley.Conversation{TurnPolicy: parley.PolicyFree, Participants: []string{"alice", "bot"}})
	if err != nil {
		t.Fatal(err)
	}
	id, want := v.Conversation.ID, ""
	alice, bot := conv.Actor{AgentID: "alice"}, conv.Actor{AgentID: "bot"}
	if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: alice, ID: "q", Role: parley.RoleUser, Parts: []parley.Part{{Type: parley.PartText, Text: "why?"}}, Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: "a", Role: parley.RoleAssistant, ReplyTo: "q", Streaming: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"because ", "it ", "is."} {
		if _, err := eng.StreamText(ctx, id, conv.StreamText{Actor: bot, MessageID: "a", Delta: d}); err != nil {
			t.Fatal(err)
		}
		want += d
	}
	r, err := eng.PostMessage(ctx, id, conv.PostMessage{Actor: bot, ID: "r", Role: parley.RoleAssistant, ReplyTo: "a", Parts: []parley.Part{{Type: parley.PartText, Text: "see"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ctx: ctx, db: db, eng: eng, id: id, want: want, head: r.Seq}
}

// TestStreamingMessageIsReadAssembled: a message still streaming is read
// with all its text so far, complete as of the seq the conversation is at,
// by every read that returns it: a page of messages, the message, its
// question's replies, a thread it stands in, and the streaming messages
// of its agent; its row alone is behind its chunks.
func TestStreamingMessageIsReadAssembled(t *testing.T) {
	t.Parallel()
	f := streaming(t)
	ctx, id, want, head := f.ctx, f.id, f.want, f.head
	rd := reads.New(f.db, f.eng)

	check := func(how string, m *parley.Message) {
		t.Helper()
		if m.ID != "a" || m.Status != parley.StatusStreaming || textOf(m) != want || m.UpdatedSeq != head {
			t.Errorf("%s: message %s %s %q as of seq %d; want a streaming %q as of seq %d", how, m.ID, m.Status, textOf(m), m.UpdatedSeq, want, head)
		}
	}
	if row, err := rd.StoredMessage(ctx, id, "a"); err != nil || row.UpdatedSeq >= head {
		t.Fatalf("the row of a: %+v (%v); want one behind seq %d", row, err, head)
	}
	ms, err := rd.Messages(ctx, store.ListMessagesParams{ConversationID: id, Limit: 10})
	if err != nil || len(ms) != 3 {
		t.Fatalf("messages: %d (%v)", len(ms), err)
	}
	check("Messages", ms[1])
	m, err := rd.Message(ctx, id, "a")
	if err != nil {
		t.Fatal(err)
	}
	check("Message", m)
	replies, err := rd.Replies(ctx, store.ListRepliesParams{ConversationID: id, MessageID: "q", Limit: 10})
	if err != nil || len(replies) != 1 {
		t.Fatalf("replies: %d (%v)", len(replies), err)
	}
	check("Replies", replies[0])
	for _, mid := range []string{"q", "a", "r"} {
		th, err := rd.Thread(ctx, id, mid, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		all := append(append([]*parley.Message{th.Message}, th.Ancestors...), th.Descendants...)
		if len(all) != 3 {
			t.Fatalf("thread of %s: %d messages", mid, len(all))
		}
		for _, m := range all {
			if m.ID == "a" {
				check("Thread of "+mid, m)
			}
		}
	}
	of, err := rd.StreamingOf(ctx, id, "bot")
	if err != nil || len(of) != 1 {
		t.Fatalf("streaming of bot: %d (%v)", len(of), err)
	}
	check("StreamingOf", of[0])
	err = rd.At(ctx, id, func(s *reads.Snapshot) error {
		return s.EachMessage(ctx, func(m *parley.Message) error {
			if m.ID == "a" && textOf(m) != want {
				t.Errorf("EachMessage: a is %q, want %q", textOf(m), want)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMessageEndedSinceIsReadAsItIsNow: a message read streaming that has
// ended by the time it is assembled is shown as its row is then.
func TestMessageEndedSinceIsReadAsItIsNow(t *testing.T) {
	t.Parallel()
	f := streaming(t)
	ctx, eng, id, want := f.ctx, f.eng, f.id, f.want
	var final *parley.Message
	// The engine is asked after the rows were read; the message ends in
	// between.
	rd := reads.New(f.db, endsFirst{Engine: eng, end: func() {
		r, err := eng.FinalizeMessage(ctx, id, conv.FinalizeMessage{Actor: conv.Actor{AgentID: "bot"}, MessageID: "a", Reason: parley.FinishEndTurn})
		if err != nil {
			t.Fatal(err)
		}
		final = r.Message
	}})
	m, err := rd.Message(ctx, id, "a")
	if err != nil {
		t.Fatal(err)
	}
	if final == nil || m.Status != final.Status || m.Status == parley.StatusStreaming || textOf(m) != want {
		t.Fatalf("a ended since it was read: %s %q; want %q as it ended", m.Status, textOf(m), want)
	}
}

// endsFirst is an engine that calls end before it is first asked what
// streams.
type endsFirst struct {
	*engine.Engine
	end func()
}

func (e endsFirst) Streaming(ctx context.Context, id string, want func(messageID, agentID string) bool) ([]*parley.Message, error) {
	if e.end != nil {
		e.end()
	}
	return e.Engine.Streaming(ctx, id, want)
}
