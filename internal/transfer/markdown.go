package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// NoReply is the mark, in the Markdown export, of an incoming message that
// was delivered to an agent and that no message replies to.
const NoReply = "[in-memory, no reply]"

// thread is what the Markdown export learns in its first pass over the log
// and the rows: who each message went to and who answered what. It holds
// ids and times, not messages: the second pass reads the rows and the turn
// events again, a page at a time, as it writes them.
type thread struct {
	participants map[string]bool
	// toNext are the agents told to act next after the message written at
	// a seq closed its turn.
	toNext map[int64][]string
	// dispatched maps a prompt's message id to the runner it went to.
	dispatched map[string][]string
	// authors maps a message id to its author, for "reply to" labels.
	authors map[string]string
	// answered holds the ids that some message replies to.
	answered map[string]bool
	// lastAnswer is, per agent, the time of its latest assistant message:
	// the timestamp heuristic for legacy messages.
	lastAnswer map[string]time.Time
	// heuristic counts the messages decided by the timestamp heuristic.
	heuristic int
}

// learn reads the log and the message rows once (the first pass).
func learn(ctx context.Context, st store.Reader, s conv.State) (*thread, error) {
	th := &thread{participants: map[string]bool{}, toNext: map[int64][]string{}, dispatched: map[string][]string{},
		authors: map[string]string{}, answered: map[string]bool{}, lastAnswer: map[string]time.Time{}}
	for _, p := range s.Conversation.Participants {
		th.participants[p] = true
	}
	if err := th.learnEvents(ctx, st, s); err != nil {
		return nil, err
	}
	// Only their heads: the rows are decoded in the second pass.
	err := eachHead(ctx, st, s.Conversation.ID, func(m *parley.Message) error {
		th.authors[m.ID] = m.AgentID
		if m.ReplyTo != "" {
			th.answered[m.ReplyTo] = true
		}
		if m.Role == parley.RoleAssistant && m.CreatedAt.After(th.lastAnswer[m.AgentID]) {
			th.lastAnswer[m.AgentID] = m.CreatedAt.Time
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return th, nil
}

// recipients are the agents message m was delivered to: the runner a
// prompt was dispatched to, or whom the server told to act next when the
// message closed its turn, or (legacy) the agents whose memory held it.
func (th *thread) recipients(m *parley.Message) []string {
	if m.Legacy != nil {
		// Legacy data says who saw a message: the memories that held it.
		return slices.DeleteFunc(slices.Clone(m.Legacy.SeenBy), func(a string) bool { return a == m.AgentID })
	}
	if to, ok := th.dispatched[m.ID]; ok {
		return to
	}
	return th.toNext[m.Seq]
}

// learnEvents folds the log to find whom each turn-closing message went to
// and which prompts went to which runner.
func (th *thread) learnEvents(ctx context.Context, st store.Reader, s conv.State) error {
	var state conv.State
	return eachEvent(ctx, st, s.Conversation.ID, s.LastSeq, func(e *parley.Event) error {
		state = conv.Evolve(state, *e)
		switch e.Type {
		case parley.EventMessage:
			if e.Finality == parley.FinalityNone {
				return nil
			}
			if g := state.Guidance(e.Time.Time); g != nil {
				th.toNext[e.Seq] = th.others(e.AgentID, g.NextAgentID)
			}
		case parley.EventPromptDispatched:
			var p struct{ ID, Runner string }
			if json.Unmarshal(e.Data, &p) == nil && p.Runner != "" {
				th.dispatched[p.ID] = []string{p.Runner}
			}
		}
		return nil
	})
}

// notable reports whether an event of type typ is shown between the
// messages: the turn events.
func notable(typ string) bool {
	switch typ {
	case parley.EventTurnReset, parley.EventTurnAborted, parley.EventTurnClaimed, parley.EventClaimExpired,
		parley.EventDelegation, parley.EventMessagesRemoved, conv.EventTaskRun, parley.EventConversationUpdated:
		return true
	}
	return false
}

// others returns the agents named, or every participant when none is named
// (anyone may act next), without the author.
func (th *thread) others(author string, named ...string) []string {
	named = slices.DeleteFunc(slices.Clone(named), func(a string) bool { return a == "" })
	if len(named) == 0 {
		for p := range th.participants {
			named = append(named, p)
		}
		slices.Sort(named)
	}
	return slices.DeleteFunc(named, func(a string) bool { return a == author })
}

// human reports whether a message was written by a person: a user message
// whose author is not one of the conversation's agents.
func (th *thread) human(m *parley.Message) bool {
	return m.Role == parley.RoleUser && !th.participants[m.AgentID]
}

// label is the heading of a message in the Markdown export: who speaks,
// to whom or in reply to whom, and the no-reply mark.
func (th *thread) label(m *parley.Message) string {
	var b strings.Builder
	author := m.AgentID
	if author == "" {
		author = "unknown"
	}
	switch {
	case m.Role == parley.RoleTool:
		fmt.Fprintf(&b, "Tool result: %s", author)
	case m.Role == parley.RoleSystem:
		fmt.Fprintf(&b, "System: %s", author)
	case th.human(m):
		b.WriteString("From: HUMAN")
		if m.AgentID != "" && !strings.EqualFold(m.AgentID, "human") {
			fmt.Fprintf(&b, " (%s)", m.AgentID)
		}
	default:
		fmt.Fprintf(&b, "Agent: %s", author)
	}
	if m.ReplyTo != "" {
		parent, ok := th.authors[m.ReplyTo]
		switch {
		case !ok:
			fmt.Fprintf(&b, " (reply to missing message %s)", m.ReplyTo)
		case parent == "":
			b.WriteString(" (reply to unknown)")
		default:
			fmt.Fprintf(&b, " (reply to %s)", parent)
		}
		return b.String()
	}
	to := th.recipients(m)
	if len(to) == 0 || m.Role == parley.RoleTool || m.Role == parley.RoleSystem {
		return b.String()
	}
	if th.human(m) {
		fmt.Fprintf(&b, " · To: %s", strings.Join(to, ", "))
	} else {
		// An agent's message as its recipients got it.
		b.Reset()
		fmt.Fprintf(&b, "Agent: %s (message from %s)", strings.Join(to, ", "), author)
	}
	if !th.hasReply(m, to) {
		b.WriteString(" " + NoReply)
	}
	return b.String()
}

// hasReply reports whether an incoming message was answered: a message
// names it in replyTo; or, for a legacy message that no reply names, one of
// its recipients wrote an assistant message after it (the timestamp
// heuristic of docs/export.md, counted).
func (th *thread) hasReply(m *parley.Message, to []string) bool {
	if th.answered[m.ID] || m.Status == parley.StatusStreaming {
		return true
	}
	if m.Legacy == nil {
		return false
	}
	th.heuristic++
	for _, a := range to {
		if th.lastAnswer[a].After(m.CreatedAt.Time) {
			return true
		}
	}
	return false
}

// writeMarkdown renders the conversation for people (the second pass).
func writeMarkdown(ctx context.Context, snap *reads.Snapshot, w *bufio.Writer) (Stats, error) {
	var stats Stats
	st, s := snap.Store, snap.State
	th, err := learn(ctx, st, s)
	if err != nil {
		return stats, err
	}
	c := s.Conversation
	title := c.Title
	if title == "" {
		title = "Conversation " + c.ID
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "- id: `%s` · epoch `%s` · created %s", c.ID, c.Epoch, c.CreatedAt.Format(time.RFC3339))
	if c.CreatedBy != "" {
		fmt.Fprintf(w, " by %s", c.CreatedBy)
	}
	fmt.Fprintf(w, "\n- participants: %s · turn policy: %s\n", orNone(strings.Join(c.Participants, ", ")), c.TurnPolicy)
	fmt.Fprintf(w, "- events: %d · turns: %d", s.LastSeq, s.LastTurn)
	if s.Closed {
		w.WriteString(" · closed")
	}
	w.WriteString("\n")

	// The messages, with the turn events between them, in seq order.
	r := &renderer{w: w, th: th, turn: -1}
	log := &events{r: st, id: c.ID, last: s.LastSeq}
	next, err := nextNotable(ctx, log)
	err = snap.EachMessage(ctx, func(m *parley.Message) error {
		for ; err == nil && next != nil && next.Seq < m.Seq; next, err = nextNotable(ctx, log) {
			r.event(next)
		}
		if err != nil {
			return err
		}
		r.message(m)
		stats.Messages++
		return nil
	})
	for ; err == nil && next != nil; next, err = nextNotable(ctx, log) {
		r.event(next)
	}
	if err != nil {
		return stats, err
	}
	stats.Events = s.LastSeq
	stats.Heuristic = th.heuristic
	fmt.Fprintf(w, "\n---\n\n%d messages in %d turns.", stats.Messages, s.LastTurn)
	if th.heuristic > 0 {
		fmt.Fprintf(w, " Legacy data without threading: the timestamp heuristic decided %d messages.", th.heuristic)
	}
	w.WriteString("\n")
	return stats, nil
}

// nextNotable returns the next turn event of log, or nil after the last.
func nextNotable(ctx context.Context, log *events) (*parley.Event, error) {
	for {
		e, err := log.next(ctx)
		if e == nil || err != nil || notable(e.Type) {
			return e, err
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// renderer writes the body: exchanges, turns, messages and turn events.
type renderer struct {
	w      *bufio.Writer
	th     *thread
	n      int
	turnID string
	turn   int
}

// group opens an exchange (a turnId) and a turn when they change.
func (r *renderer) group(turnID string, turn int, agent string) {
	if turnID != "" && turnID != r.turnID {
		r.turnID = turnID
		fmt.Fprintf(r.w, "\n## Exchange `%s`\n", turnID)
		r.turn = -1
	}
	if turn != r.turn {
		r.turn = turn
		if turn == 0 {
			r.w.WriteString("\n### Outside turns\n")
		} else {
			fmt.Fprintf(r.w, "\n### Turn %d · %s\n", turn, agent)
		}
	}
}

func (r *renderer) message(m *parley.Message) {
	r.group(m.TurnID, m.Turn, m.AgentID)
	r.n++
	fmt.Fprintf(r.w, "\n%d. **%s**\n", r.n, r.th.label(m))
	fmt.Fprintf(r.w, "   <sub>`%s` · seq %d · %s · finality %s · %s</sub>\n", m.ID, m.Seq, m.Status, m.Finality, m.CreatedAt.Format(time.RFC3339))
	for _, p := range m.Parts {
		r.part(p)
	}
}

func (r *renderer) part(p parley.Part) {
	switch p.Type {
	case parley.PartText:
		if p.Text != "" {
			r.w.WriteString("\n")
			fenced(r.w, "   ", "text", p.Text)
		}
		if p.Streaming {
			r.w.WriteString("   _(still streaming)_\n")
		}
	case parley.PartToolCall:
		fmt.Fprintf(r.w, "\n   - tool call `%s` · %s · call `%s`\n", p.ToolName, p.Status, p.CallID)
		r.jsonItem("args", p.Args)
		r.jsonItem("result", p.Result)
		if p.Error != "" {
			fmt.Fprintf(r.w, "     - error: %s\n", oneLine(p.Error))
		}
	case parley.PartFinish:
		if p.Reason != parley.FinishEndTurn {
			fmt.Fprintf(r.w, "\n   - _stopped (%s)_\n", p.Reason)
		}
	case parley.PartError:
		fmt.Fprintf(r.w, "\n   - **error:** %s\n", oneLine(p.Message))
	case parley.PartInputRequest:
		r.inputRequest(p)
	default:
		fmt.Fprintf(r.w, "\n   - part `%s`\n", p.Type)
	}
}

// jsonItem writes a tool call's args or result: inline when short, else fenced.
func (r *renderer) jsonItem(name string, v json.RawMessage) {
	if len(v) == 0 {
		return
	}
	s := string(v)
	if len(s) <= 120 && !strings.ContainsAny(s, "`\n") {
		fmt.Fprintf(r.w, "     - %s: `%s`\n", name, s)
		return
	}
	fmt.Fprintf(r.w, "     - %s:\n\n", name)
	fenced(r.w, "       ", "json", s)
}

// event writes the turn events that people need to follow the log.
func (r *renderer) event(e *parley.Event) {
	var line string
	switch e.Type {
	case parley.EventTurnReset:
		line = fmt.Sprintf("turn %d reset by %s", e.Turn, e.AgentID)
	case parley.EventTurnAborted:
		var ref parley.TurnRef
		_ = json.Unmarshal(e.Data, &ref)
		line = fmt.Sprintf("turn %d aborted by %s", e.Turn, e.AgentID)
		if ref.Reason != "" {
			line += ": " + oneLine(ref.Reason)
		}
	case parley.EventTurnClaimed:
		var c parley.Claim
		_ = json.Unmarshal(e.Data, &c)
		line = fmt.Sprintf("%s claimed turn %d until %s", c.AgentID, c.Turn, c.ExpiresAt.Format(time.RFC3339))
	case parley.EventClaimExpired:
		var c parley.Claim
		_ = json.Unmarshal(e.Data, &c)
		line = fmt.Sprintf("the claim of %s on turn %d expired", c.AgentID, c.Turn)
	case parley.EventDelegation:
		var d parley.Delegation
		_ = json.Unmarshal(e.Data, &d)
		line = fmt.Sprintf("%s delegated turn %d to %s", d.From, d.Turn, d.To)
	case parley.EventMessagesRemoved:
		var rm parley.MessagesRemoved
		_ = json.Unmarshal(e.Data, &rm)
		line = "reverted: " + strings.Join(rm.MessageIDs, ", ") + " removed"
		if e.AgentID != "" {
			line = fmt.Sprintf("reverted by %s: %s removed", e.AgentID, strings.Join(rm.MessageIDs, ", "))
		}
	case parley.EventConversationUpdated:
		var u parley.ConversationUpdate
		_ = json.Unmarshal(e.Data, &u)
		line = fmt.Sprintf("%s changed the conversation: title %q, participants %s, members %s", u.UpdatedBy, u.Title,
			orNone(strings.Join(u.Participants, ", ")), orNone(strings.Join(u.Members, ", ")))
	case conv.EventTaskRun:
		var t struct{ TaskID string }
		_ = json.Unmarshal(e.Data, &t)
		line = fmt.Sprintf("scheduled task %s ran (exchange `%s`)", t.TaskID, e.TurnID)
	default:
		return // chunks, updates, traces and the prompt queue are in the JSON export
	}
	fmt.Fprintf(r.w, "\n> %s · seq %d\n", line, e.Seq)
}

// fenced writes text as a fenced code block, indented, with a fence longer
// than any run of backticks inside it.
func fenced(w *bufio.Writer, indent, lang, text string) {
	fence := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	w.WriteString(indent + fence + lang + "\n")
	for l := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		w.WriteString(indent + l + "\n")
	}
	w.WriteString(indent + fence + "\n")
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// oneLine keeps a short text on one line.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > 500 {
		s = string(r[:500]) + "…"
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// inputRequest writes what an agent asked a person and how it ended.
func (r *renderer) inputRequest(p parley.Part) {
	fmt.Fprintf(r.w, "\n   - asks (%s `%s`): %s · %s\n", p.Kind, p.RequestID, oneLine(p.Title), p.Status)
	if p.ToolName != "" {
		fmt.Fprintf(r.w, "     - tool `%s`\n", p.ToolName)
	}
	r.jsonItem("args", p.Args)
	if p.Detail != "" {
		fmt.Fprintf(r.w, "     - detail: %s\n", oneLine(p.Detail))
	}
	for _, o := range p.Options {
		fmt.Fprintf(r.w, "     - option: %s\n", oneLine(o.Label))
	}
	switch {
	case p.Status == parley.InputStatusAnswered:
		fmt.Fprintf(r.w, "     - answered by %s at %s\n", p.AnsweredBy, p.AnsweredAt.Format(time.RFC3339))
		r.jsonItem("answer", p.Answer)
	case p.Reason != "":
		fmt.Fprintf(r.w, "     - %s (%s)\n", p.Status, p.Reason)
	}
}
