package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
)

// legacyRow is one row of an older agent-memory store: a message as one agent
// saw it. The same message (same messageId) appears once per agent whose
// memory holds it; rows from before threading lack replyToMessageId, and
// the oldest lack messageId too.
type legacyRow struct {
	MessageID        string          `json:"messageId"`
	ID               string          `json:"id"`
	ReplyToMessageID *string         `json:"replyToMessageId"`
	ReplyTo          *string         `json:"replyTo"`
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	Sender           string          `json:"sender"`
	AgentID          string          `json:"agentId"`
	ChatID           *string         `json:"chatId"`
	CreatedAt        json.RawMessage `json:"createdAt"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	// Parley is set when the row is in fact an export's header whose keys
	// were reordered ("parley" is not first), to say so.
	Parley string `json:"parley"`
}

// message reports whether r is a message row: it has a role, content or a
// tool call (or its result). Rows of no other kind are imported; an object
// with none of them is not a row of an agent-memory store at all.
func (r *legacyRow) message() bool {
	return r.Role != "" || r.Content != "" || len(r.ToolCalls) > 0 || r.ToolCallID != ""
}

// legacyOp is a write waiting in the batch: a new message, or an update of
// one written before (another agent's copy of it was found).
type legacyOp struct {
	m      *parley.Message
	update bool
}

// legacyState is what a legacy import carries from row to row.
type legacyState struct {
	participants map[string]bool
	// pending is the newest message: its finality is known only when the
	// next message shows whether its author goes on.
	pending  *parley.Message
	ops      []legacyOp
	lastTurn int
	lastTime time.Time
	// exchange is the turnId of the last message that started one.
	exchange string
	chat     *string
	// calls maps recent tool call ids to the message that made them.
	calls map[string]string
	named map[string]bool
}

// maxCalls bounds the tool call index; an older call's result then gets a
// missing-parent warning instead of a parent.
const maxCalls = 10000

// legacy imports message rows: a JSON array or JSON Lines of legacyRow.
func (imp *importer) legacy(ctx context.Context, head []byte) error {
	array := head[0] == '['
	if array {
		if _, err := imp.dec.Token(); err != nil {
			return parley.Errorf(parley.EINVALID, "row 1: %v", err)
		}
	}
	ls := &legacyState{participants: map[string]bool{}, calls: map[string]string{}, named: map[string]bool{}}
	participants := imp.opts.Participants
	if len(participants) == 0 {
		participants = scanAgents(head)
	}
	for _, p := range participants {
		ls.participants[p] = true
	}
	for {
		if array && !imp.dec.More() {
			break
		}
		var r legacyRow
		err := imp.next(&r)
		if errors.Is(err, io.EOF) { // an array cut short after a comma is refused below
			break
		}
		if err != nil {
			return err
		}
		if !r.message() && r.Parley != "" {
			return parley.Errorf(parley.EINVALIDVALUE, `row %d: a Parley export whose first key is not "parley" (its keys were reordered, by a tool that sorts them?): import it as it was exported`, imp.row)
		}
		if !r.message() {
			return parley.Errorf(parley.EINVALIDVALUE, `row %d: not a message row (it has no role, content, tool_calls or tool_call_id), and the input does not start as a Parley export does ({"parley":"export", …}): it is neither`, imp.row)
		}
		if imp.im == nil {
			if err := imp.beginLegacy(ctx, participants, r); err != nil {
				return err
			}
		}
		if err := imp.legacyRow(ctx, ls, r); err != nil {
			return err
		}
		if len(ls.ops) >= batchSize {
			if err := imp.flushLegacy(ctx, ls); err != nil {
				return err
			}
		}
	}
	if array {
		// A cut-short upload is refused, not imported in part: the array
		// must close, with nothing after it.
		if t, err := imp.dec.Token(); err != nil || t != json.Delim(']') {
			return parley.Errorf(parley.EINVALID, "row %d: the JSON array ends before its closing ]", imp.row)
		}
		if _, err := imp.dec.Token(); !errors.Is(err, io.EOF) {
			return parley.Errorf(parley.EINVALID, "something follows the JSON array of rows")
		}
	}
	if imp.im == nil {
		return parley.Errorf(parley.EINVALID, "no rows to import")
	}
	if ls.pending != nil {
		ls.pending.Finality = parley.FinalityTurn
		ls.ops = append(ls.ops, legacyOp{m: ls.pending})
		ls.pending = nil
	}
	return imp.flushLegacy(ctx, ls)
}

// scanAgents finds the agents of the rows at the start of the input: the
// owners of memories and the senders of assistant messages.
func scanAgents(head []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(head))
	if len(head) > 0 && head[0] == '[' {
		_, _ = dec.Token()
	}
	seen := map[string]bool{}
	for {
		var r legacyRow
		if dec.Decode(&r) != nil {
			break
		}
		if a := agentID(r.AgentID); a != "" {
			seen[a] = true
		}
		if a := agentID(r.Sender); a != "" && r.Role == "assistant" {
			seen[a] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// agentID makes a legacy name a Parley id: characters outside A–Z a–z 0–9
// . _ : - become '-', and so do the dots of "." and "..", which are no ids.
func agentID(name string) string {
	var b strings.Builder
	for i := 0; i < len(name) && b.Len() < parley.MaxIDLen; i++ {
		c := name[i]
		if parley.IDChar(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('-')
		}
	}
	if s := b.String(); s == "." || s == ".." {
		return strings.Repeat("-", len(s))
	}
	return b.String()
}

// beginLegacy creates the conversation, created at the first row's time.
func (imp *importer) beginLegacy(ctx context.Context, participants []string, first legacyRow) error {
	c := parley.Conversation{ID: imp.opts.ID, Title: imp.opts.Title, Participants: participants,
		TurnPolicy: parley.PolicyFree, CreatedBy: imp.opts.CreatedBy}
	if c.ID == "" {
		c.ID = engine.NewID()
	}
	if c.Title == "" {
		c.Title = "Imported legacy conversation"
	}
	if t, ok := legacyTime(first.CreatedAt); ok {
		c.CreatedAt = parley.NewTime(t)
	} else {
		c.CreatedAt = parley.NewTime(time.Now())
	}
	im, err := imp.eng.BeginImport(ctx, c)
	if err != nil {
		return err
	}
	imp.im, imp.res.Events = im, 1
	return nil
}

// legacyTime reads an RFC 3339 string or milliseconds since 1970.
func legacyTime(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	return time.UnixMilli(ms), err == nil && ms > 0
}

// legacyRow turns one row into a new message or into another agent's copy
// of a message seen before, warning about each oddity.
func (imp *importer) legacyRow(ctx context.Context, ls *legacyState, r legacyRow) error {
	warn := func(kind, id, format string, args ...any) {
		imp.res.warn(Warning{Row: imp.row, Kind: kind, MessageID: id, Text: fmt.Sprintf(format, args...)})
	}
	id, madeID := r.MessageID, false
	if id == "" {
		id = r.ID
	}
	if !parley.ValidID(id) {
		made := fmt.Sprintf("legacy-%d", imp.row)
		if id == "" {
			warn(WarnNoID, made, "no messageId: made id %s; its replies are found by the timestamp heuristic", made)
		} else {
			warn(WarnNoID, made, "messageId %q is not a valid Parley id: made id %s", id, made)
		}
		id, madeID = made, true
	}
	role := parley.Role(r.Role)
	if !role.Valid() {
		warn(WarnBadRole, id, "role %q is unknown: imported as user", r.Role)
		role = parley.RoleUser
	}
	when, ok := legacyTime(r.CreatedAt)
	switch {
	case !ok:
		when = ls.lastTime
		warn(WarnNoTime, id, "no createdAt: given the time of the row before")
	case when.Before(ls.lastTime):
		warn(WarnOutOfOrder, id, "createdAt %s is before the row before: kept, in file order", when.Format(time.RFC3339Nano))
	}
	if when.After(ls.lastTime) {
		ls.lastTime = when
	}
	if r.ChatID != nil && (ls.chat == nil || *ls.chat != *r.ChatID) {
		if ls.chat != nil {
			warn(WarnChats, id, "chatId %q after %q: both chats go into this one conversation", *r.ChatID, *ls.chat)
		}
		ls.chat = r.ChatID
	}

	// Another agent's copy of a message already imported.
	if !madeID {
		existing, flushed, err := imp.findLegacy(ctx, ls, id)
		if err != nil {
			return err
		}
		if existing != nil {
			imp.mergeCopy(ls, existing, flushed, r, role, when)
			return nil
		}
	}

	author := r.Sender
	if role != parley.RoleUser && author == "" {
		author = r.AgentID
	}
	if author == "" {
		author = map[bool]string{true: "human", false: "unknown"}[role == parley.RoleUser]
		warn(WarnNoSender, id, "no sender: imported as %s", author)
	}
	if a := agentID(author); a != author {
		warn(WarnNoSender, id, "sender %q is not a valid id: imported as %s", author, a)
		author = a
	}
	if (role == parley.RoleAssistant || role == parley.RoleTool) && !ls.participants[author] && !ls.named[author] {
		ls.named[author] = true
		warn(WarnNewAgent, id, "agent %s is not among the participants (%s)", author, strings.Join(slices.Sorted(maps.Keys(ls.participants)), ", "))
	}
	m := &parley.Message{ID: id, Role: role, AgentID: author, Status: parley.StatusComplete,
		Finality: parley.FinalityNone, CreatedAt: parley.NewTime(when), UpdatedAt: parley.NewTime(when),
		Legacy: &parley.Legacy{Row: imp.row, MadeID: madeID}}
	if owner := agentID(r.AgentID); role == parley.RoleUser && owner != "" && owner != author {
		m.Legacy.SeenBy = []string{owner}
	}
	if r.Content != "" {
		m.Parts = append(m.Parts, parley.Part{Type: parley.PartText, Text: r.Content})
	}
	for _, tc := range r.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(tc.Function.Arguments)
		}
		m.Parts = append(m.Parts, parley.Part{Type: parley.PartToolCall, CallID: tc.ID, ToolName: tc.Function.Name, Status: parley.ToolCompleted, Args: args})
		if len(ls.calls) >= maxCalls {
			clear(ls.calls)
		}
		ls.calls[tc.ID] = id
	}
	m.Content = parley.TextContent(m.Parts)
	if m.Parts == nil {
		m.Parts = []parley.Part{}
	}
	if err := imp.thread(ctx, ls, m, r, warn); err != nil {
		return err
	}

	// Turns: an author's consecutive messages share a turn; another author
	// closes it and opens the next.
	if p := ls.pending; p != nil {
		if p.AgentID == author {
			m.Turn = p.Turn
		} else {
			p.Finality = parley.FinalityTurn
		}
		ls.ops = append(ls.ops, legacyOp{m: p})
	}
	if m.Turn == 0 {
		ls.lastTurn++
		m.Turn = ls.lastTurn
	}
	ls.pending = m
	return nil
}

// thread sets a new message's replyTo, depth and turnId.
func (imp *importer) thread(ctx context.Context, ls *legacyState, m *parley.Message, r legacyRow, warn func(kind, id, format string, args ...any)) error {
	replyTo := r.ReplyToMessageID
	if replyTo == nil {
		replyTo = r.ReplyTo
	}
	if replyTo == nil && r.ToolCallID != "" {
		if owner, ok := ls.calls[r.ToolCallID]; ok {
			replyTo = &owner
		}
	}
	switch {
	case replyTo == nil || *replyTo == "":
		if m.Role == parley.RoleAssistant || m.Role == parley.RoleTool {
			warn(WarnNoReplyTo, m.ID, "%s message without replyToMessageId: imported without a parent", m.Role)
		}
	case *replyTo == m.ID:
		warn(WarnSelfReply, m.ID, "replyToMessageId is the message's own id: dropped")
	default:
		m.ReplyTo = *replyTo
		parent, _, err := imp.findLegacy(ctx, ls, m.ReplyTo)
		if err != nil {
			return err
		}
		if parent == nil {
			warn(WarnMissingParent, m.ID, "parent %s is not an earlier message: kept as replyTo, depth 0", m.ReplyTo)
			break
		}
		m.Depth, m.TurnID = parent.Depth+1, parent.TurnID
		if limit := imp.eng.Limits().MaxThreadDepth; m.Depth >= limit {
			// As deep as no live reply may be: the message starts a thread
			// of its own (in the same exchange), and its replies follow it.
			warn(WarnTooDeep, m.ID, "%d ancestors, over the limit of %d: replyTo %s dropped, it starts a thread", m.Depth, limit-1, m.ReplyTo)
			m.ReplyTo, m.Depth = "", 0
		}
	}
	if m.TurnID == "" {
		if m.Role == parley.RoleUser || ls.exchange == "" {
			ls.exchange = m.ID // a question (or the first message) starts an exchange
		}
		m.TurnID = ls.exchange
	}
	return nil
}

// findLegacy finds a message of this import: pending, in the batch, or
// written (flushed is then true).
func (imp *importer) findLegacy(ctx context.Context, ls *legacyState, id string) (m *parley.Message, flushed bool, err error) {
	if ls.pending != nil && ls.pending.ID == id {
		return ls.pending, false, nil
	}
	for i := len(ls.ops) - 1; i >= 0; i-- {
		if ls.ops[i].m.ID == id {
			return ls.ops[i].m, false, nil
		}
	}
	m, err = imp.im.Message(ctx, id)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return nil, false, nil
	}
	return m, err == nil, err
}

// mergeCopy records another agent's copy of message m: its owner saw it
// (a recipient), and an assistant copy names the role of the author's own.
func (imp *importer) mergeCopy(ls *legacyState, m *parley.Message, flushed bool, r legacyRow, role parley.Role, when time.Time) {
	changed := false
	if owner := agentID(r.AgentID); owner != "" && owner != m.AgentID && !slices.Contains(m.Legacy.SeenBy, owner) {
		if limit := imp.eng.Limits().MaxParticipants; len(m.Legacy.SeenBy) < limit {
			m.Legacy.SeenBy = append(m.Legacy.SeenBy, owner)
			changed = true
		} else {
			imp.res.warn(Warning{Row: imp.row, Kind: WarnSeenBy, MessageID: m.ID, Text: fmt.Sprintf("seen by %s too, past the %d agents a message records: not recorded", owner, limit)})
		}
	}
	if role == parley.RoleAssistant && m.Role == parley.RoleUser {
		m.Role = parley.RoleAssistant
		changed = true
	}
	if changed && flushed {
		if when.After(m.UpdatedAt.Time) {
			m.UpdatedAt = parley.NewTime(when)
		}
		ls.ops = append(ls.ops, legacyOp{m: m, update: true})
	}
}

// flushLegacy turns the batch into events (a message event per new message,
// message.updated per update) and writes them with the rows.
func (imp *importer) flushLegacy(ctx context.Context, ls *legacyState) error {
	seq := imp.im.LastSeq()
	for _, op := range ls.ops {
		seq++
		typ, fin, at := parley.EventMessageUpdated, parley.FinalityNone, op.m.UpdatedAt
		if !op.update {
			op.m.Seq = seq
			typ, fin, at = parley.EventMessage, op.m.Finality, op.m.CreatedAt
		}
		data, err := json.Marshal(op.m)
		if err != nil {
			return err
		}
		e := parley.Event{Seq: seq, Type: typ, Turn: op.m.Turn, TurnID: op.m.TurnID, AgentID: op.m.AgentID, Finality: fin, Time: at, Data: data}
		// What a server writes, an import writes too: the message is held
		// to the bounds of a live write.
		if err := imp.im.Check(&e); err != nil {
			return parley.Errorf(parley.ErrorCode(err), "row %d: message %q: %s", op.m.Legacy.Row, op.m.ID, parley.ErrorMessage(err))
		}
		imp.events = append(imp.events, e)
		imp.msgs = append(imp.msgs, op.m) // an update replaces the row
	}
	ls.ops = ls.ops[:0]
	return imp.flush(ctx)
}
