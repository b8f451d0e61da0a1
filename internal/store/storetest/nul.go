package storetest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// testNULRefusedAlike: every write of a value that holds U+0000 (a \u0000
// escape in JSON, a raw NUL in text), text that is not UTF-8, or a JSON
// number beyond PostgreSQL's numeric (parley.HasOversizedNumber) is refused
// with invalid_value, the same on every store (PostgreSQL could not store
// it, or could not read it back in its queries), and writes nothing.
func testNULRefusedAlike(t *testing.T, s store.Store) {
	id := newConversation(t, s)
	newConv := func() parley.Conversation {
		return parley.Conversation{ID: uuid.NewString(), Epoch: "ep", Title: "t", Participants: []string{"a"}, TurnPolicy: parley.PolicyFree,
			MessageFormat: "v2", CreatedBy: "a", CreatedAt: t0}
	}
	created := func(c parley.Conversation) parley.Event {
		e := event(c.ID, 1, "")
		e.Type, e.Data = parley.EventConversationCreated, json.RawMessage(mustJSON(t, c))
		return e
	}
	bad := []struct {
		name  string
		write func() error
	}{
		{"a conversation's title", func() error {
			c := newConv()
			c.Title = "a\x00b"
			return s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{created(c)}, State: []byte(`{}`)})
		}},
		{"a conversation's title, not UTF-8", func() error {
			c := newConv()
			c.Title = "a\xffb"
			return s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(c.ID, 1, "")}, State: []byte(`{}`)})
		}},
		{"a conversation's metadata", func() error {
			c := newConv()
			c.Metadata = json.RawMessage(`{"k":"\u0000"}`)
			return s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(c.ID, 1, "")}, State: []byte(`{}`)})
		}},
		{"a conversation's metadata, a number PostgreSQL cannot read", func() error {
			c := newConv()
			c.Metadata = json.RawMessage(`{"n":1e200000}`)
			return s.CreateConversation(ctx(t), store.CreateConversationParams{Conversation: c, Events: []parley.Event{event(c.ID, 1, "")}, State: []byte(`{}`)})
		}},
		{"an event's data, a number of 1001 digits", func() error {
			e := event(id, 2, "a")
			e.Data = json.RawMessage(`{"n":1` + strings.Repeat("0", parley.MaxNumberDigits) + `}`)
			return s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{e}, State: []byte(`{}`)})
		}},
		{"an event's data", func() error {
			e := event(id, 2, "a")
			e.Data = json.RawMessage(`{"text":"a\u0000"}`)
			return s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{e}, State: []byte(`{}`)})
		}},
		{"a message's text", func() error {
			m := message(id, "nul", 2, "", 0)
			m.Content, m.Parts = "a\x00b", []parley.Part{{Type: parley.PartText, Text: "a\x00b"}}
			return s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Messages: []*parley.Message{m}, State: []byte(`{}`)})
		}},
		{"a message's tool result", func() error {
			m := message(id, "nul", 2, "", 0)
			m.Parts = append(m.Parts, parley.Part{Type: parley.PartToolCall, CallID: "c", ToolName: "t", Status: parley.ToolCompleted, Result: json.RawMessage(`"\u0000"`)})
			return s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Messages: []*parley.Message{m}, State: []byte(`{}`)})
		}},
		{"a prompt queue", func() error {
			return s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, State: []byte(`{}`), Queue: []byte(`[{"id":"\u0000"}]`)})
		}},
		{"a delivery", func() error {
			d := &parley.Delivery{ID: uuid.NewString(), ConversationID: id, MessageID: "m", Channel: parley.Channel{Type: "slack", ID: "C1"}, Content: "a\x00", NextAttemptAt: t0, CreatedAt: t0}
			return s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Deliveries: []*parley.Delivery{d}, State: []byte(`{}`)})
		}},
		{"a task's prompt", func() error {
			return s.CreateTask(ctx(t), store.CreateTaskParams{Task: &parley.Task{ID: uuid.NewString(), ConversationID: id, AgentID: "a", Prompt: "a\x00", EveryMs: 60000, NextRunAt: t0, CreatedAt: t0}})
		}},
		{"a token's name", func() error {
			return s.CreateToken(ctx(t), &parley.Token{ID: uuid.NewString(), Kind: parley.TokenViewer, Name: "a\x00", Hash: uuid.NewString(), CreatedAt: t0})
		}},
		{"a token's name, not UTF-8", func() error {
			return s.CreateToken(ctx(t), &parley.Token{ID: uuid.NewString(), Kind: parley.TokenViewer, Name: "a\xc3", Hash: uuid.NewString(), CreatedAt: t0})
		}},
	}
	tokens, err := s.ListTokens(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bad {
		wantCode(t, c.write(), parley.EINVALIDVALUE)
	}
	if h, err := s.Head(ctx(t), id); err != nil || h.Seq != 1 {
		t.Fatalf("after the refused appends the head is %+v (%v), want seq 1", h, err)
	}
	if after, err := s.ListTokens(ctx(t)); err != nil || len(after) != len(tokens) {
		t.Fatalf("a refused token was stored: %d tokens, %d before (%v)", len(after), len(tokens), err)
	}
	// An escaped backslash followed by u0000 is text like any other.
	m := message(id, "looks", 2, "", 0)
	m.Content, m.Parts = `a\u0000b`, []parley.Part{{Type: parley.PartText, Text: `a\u0000b`}}
	if err := s.Append(ctx(t), store.AppendParams{ConversationID: id, ExpectSeq: 1, Events: []parley.Event{event(id, 2, "a")}, Messages: []*parley.Message{m}, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetMessage(ctx(t), id, "looks"); err != nil || got.Content != `a\u0000b` {
		t.Fatalf("the text a\\u0000b reads back as %+v (%v)", got, err)
	}
}
