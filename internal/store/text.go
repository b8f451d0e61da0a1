package store

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley"
)

// A value one store takes and the other refuses would break the other's
// reads of it: PostgreSQL refuses U+0000 in text and in jsonb, text that
// is not UTF-8, and a JSON number beyond its numeric type; SQLite takes
// all three. Each store checks what it is
// given with these, the same way, before it writes anything: a write that
// holds such a value is refused (EINVALIDVALUE) on both, whatever path
// made it.

// CheckJSON refuses JSON documents that hold U+0000 (parley.HasNUL) or a
// number PostgreSQL cannot read (parley.HasOversizedNumber); what names
// them in the error.
func CheckJSON(what string, docs ...[]byte) error {
	for _, d := range docs {
		if parley.HasNUL(d) {
			return parley.ErrNUL(what)
		}
		if parley.HasOversizedNumber(d) {
			return parley.ErrNumber(what)
		}
	}
	return nil
}

// CheckText refuses strings stored as text that hold U+0000 or are not
// UTF-8; what names them in the error.
func CheckText(what string, texts ...string) error {
	for _, s := range texts {
		if strings.IndexByte(s, 0) >= 0 {
			return parley.ErrNUL(what)
		}
		if !utf8.ValidString(s) {
			return parley.Errorf(parley.EINVALIDVALUE, "%s is not UTF-8", what)
		}
	}
	return nil
}

// checkAppend refuses an append that would store U+0000 or text that is
// not UTF-8: in its events, its message rows (rows, as encoded), its
// state, queue, idempotency record or deliveries, or its ids.
func checkAppend(p *AppendParams, rows [][]byte) error {
	for i := range p.Events {
		e := &p.Events[i]
		if err := CheckJSON("event "+e.Type+"'s data", e.Data); err != nil {
			return err
		}
		if err := CheckText("event "+e.Type, e.Type, e.TurnID, e.AgentID, string(e.Finality)); err != nil {
			return err
		}
	}
	if err := CheckJSON("a message", rows...); err != nil {
		return err
	}
	if ch := p.Conversation; ch != nil {
		if ch.Conversation.ID != p.ConversationID {
			return parley.Errorf(parley.EINVALID, "the changed record is of conversation %s, the append of %s", ch.Conversation.ID, p.ConversationID)
		}
		if err := CheckConversation(CreateConversationParams{Conversation: ch.Conversation, Members: ch.Members}); err != nil {
			return err
		}
	}
	if err := CheckJSON("the conversation's state", p.State, p.Queue); err != nil {
		return err
	}
	if k := p.Idempotency; k != nil {
		if err := CheckJSON("the idempotency record", k.Response); err != nil {
			return err
		}
		if err := CheckText("the client request id", k.Key, k.RequestHash); err != nil {
			return err
		}
	}
	for _, d := range p.Deliveries {
		if err := CheckText("a delivery", d.ID, d.MessageID, d.Content, d.Channel.Type, d.Channel.ID); err != nil {
			return err
		}
	}
	for _, m := range p.Messages {
		if err := CheckText("a message's ids", m.ID, m.TurnID, m.ReplyTo, m.AgentID); err != nil {
			return err
		}
	}
	return CheckText("a name", p.Names...)
}

// CheckConversation refuses a new conversation that holds U+0000 or text
// that is not UTF-8 (see CheckJSON).
func CheckConversation(p CreateConversationParams) error {
	c := p.Conversation
	if err := CheckText("the conversation", c.ID, c.Title, c.CreatedBy, c.Epoch); err != nil {
		return err
	}
	if err := CheckJSON("the conversation's metadata", c.Metadata); err != nil {
		return err
	}
	if err := CheckText("the conversation's agents", append(append(slices.Clone(c.Participants), c.Members...), p.Members...)...); err != nil {
		return err
	}
	for i := range p.Events {
		if err := CheckJSON("event "+p.Events[i].Type+"'s data", p.Events[i].Data); err != nil {
			return err
		}
	}
	return CheckJSON("the conversation's state", p.State, p.Queue)
}

// CheckTask refuses a task that holds U+0000 or text that is not UTF-8;
// data is the task as stored.
func CheckTask(t *parley.Task, data []byte) error {
	if err := CheckText("the task", t.ID, t.ConversationID, t.AgentID, t.Prompt, t.Cron); err != nil {
		return err
	}
	return CheckJSON("the task", data)
}
