package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/mcp"
)

// demoScribe takes part in the demo only through Parley's MCP server
// (POST /v1/mcp), as an MCP client such as Claude Code would: it holds no
// runner and makes no other request. A participant after the reviewer,
// it gets the floor by the turn policy once a question is answered and
// reviewed, and writes the minutes of what was said since its last turn.
const demoScribe = "scribe"

// demoMinutesLen bounds the messages the scribe's minutes name (the last
// ones), and demoGistLen the characters of each.
const (
	demoMinutesLen = 4
	demoGistLen    = 100
)

// errGone ends the scribe: its conversation was closed or deleted.
var errGone = errors.New("the demo's conversation was closed or deleted")

// scribe keeps the scribe taking part, connecting to the MCP server again
// if a call fails, until ctx ends or the conversation is closed or
// deleted.
func (s *scene) scribe(ctx context.Context, base string) {
	for ctx.Err() == nil {
		err := s.minutes(ctx, base)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errGone):
			s.log.Info("the demo's conversation was closed or deleted: the scribe stops", slog.String("conversation", s.id))
			return
		}
		s.log.Warn("the scribe's MCP session failed; connecting again", slog.Any("err", err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// minutes connects to base's MCP server and takes the scribe's turns: it
// waits until the conversation's guidance names it, claims that turn (so
// that nobody opens it meanwhile), reads what was said since its last
// turn and posts the minutes of it, ending its turn. A turn taken by
// another first only sends it back to waiting.
func (s *scene) minutes(ctx context.Context, base string) error {
	c := gomcp.NewClient(&gomcp.Implementation{Name: "parley-demo-scribe", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: base + "/v1/mcp", HTTPClient: &http.Client{}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	// The demo's server runs open, so no token: each call names the agent
	// it acts as (against a server with tokens, an agent token would).
	var after int64 // the scribe's position: what its minutes covered
	for {
		var w mcp.ConversationOutput
		err := callTool(ctx, cs, "wait_for_turn", mcp.WaitForTurnInput{ConversationID: s.id, AgentID: demoScribe, After: after}, &w)
		switch {
		case err != nil:
			return err
		case w.Head.Closed:
			return errGone
		case w.YourTurn == nil || !*w.YourTurn:
			continue // the wait passed: wait again
		}
		if w.Guidance.Kind == parley.GuidanceStartTurn {
			err := callTool(ctx, cs, "claim_turn", mcp.ClaimTurnInput{ConversationID: s.id, AgentID: demoScribe, ExpectTurn: w.Guidance.Turn}, nil)
			if turnTaken(err) {
				continue
			}
			if err != nil {
				return err
			}
		}
		msgs := w.Messages
		for next := w.NextAfter; next != 0; { // the rest, a page at a time
			var r mcp.ConversationOutput
			if err := callTool(ctx, cs, "read_conversation", mcp.ReadConversationInput{ConversationID: s.id, After: next}, &r); err != nil {
				return err
			}
			msgs, next = append(msgs, r.Messages...), r.NextAfter
		}
		// The minutes reply to the last message they name (its thread), so
		// that they are not a message waiting for an answer.
		text, replyTo := minutesOf(msgs)
		err = callTool(ctx, cs, "post_message", mcp.PostMessageInput{ConversationID: s.id, AgentID: demoScribe, Content: text, ReplyTo: replyTo, Finality: parley.FinalityTurn}, nil)
		switch {
		case err == nil:
			if len(msgs) > 0 {
				after = msgs[len(msgs)-1].Seq
			}
		case !turnTaken(err):
			return err
		}
	}
}

// minutesOf is the scribe's message: the gist of the last messages others
// wrote; and the id of the last of them ("" if none).
func minutesOf(msgs []*parley.Message) (text, last string) {
	var lines []string
	for _, m := range msgs {
		if m.AgentID != demoScribe && m.Status == parley.StatusComplete && strings.TrimSpace(m.Content) != "" {
			lines, last = append(lines, "- **"+m.AgentID+"**: "+gist(m.Content)), m.ID
		}
	}
	if len(lines) == 0 {
		return "Minutes: nothing new since my last turn.", ""
	}
	lines = lines[max(0, len(lines)-demoMinutesLen):]
	return "Minutes since my last turn (I take part through MCP only):\n\n" + strings.Join(lines, "\n"), last
}

// gist is a message's last sentence, shortened.
func gist(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if i := strings.LastIndexAny(strings.TrimRight(text, ".?!"), ".?!"); i >= 0 && i+1 < len(text) && text[i+1] == ' ' {
		text = text[i+2:]
	}
	if r := []rune(text); len(r) > demoGistLen {
		text = string(r[:demoGistLen-1]) + "…"
	}
	return text
}

// toolError is a tool's answer isError: its text starts with the API's
// error code.
type toolError struct{ text string }

func (e *toolError) Error() string { return e.text }

// code is the error's code: "turn_conflict" of "turn_conflict: …".
func (e *toolError) code() string { c, _, _ := strings.Cut(e.text, ":"); return c }

// turnTaken reports whether err says another agent took the turn first
// (or holds a claim on it), or that the conversation moved on since the
// guidance or since the scribe read (what it replies to was reverted): the
// scribe waits for its turn again (at once, if it holds the claim).
func turnTaken(err error) bool {
	var te *toolError
	if !errors.As(err, &te) {
		return false
	}
	switch te.code() {
	case parley.ETURNCONFLICT, parley.ECLAIMCONFLICT, parley.EPRECONDITION, parley.EINVALIDTHREAD:
		return true
	}
	return false
}

// callTool calls tool name with args and decodes its structured answer
// into out (unless nil). A tool's error is a *toolError, but one saying
// the conversation is gone is errGone.
func callTool(ctx context.Context, cs *gomcp.ClientSession, name string, args, out any) error {
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if t, ok := c.(*gomcp.TextContent); ok {
				text = append(text, t.Text)
			}
		}
		te := &toolError{text: strings.Join(text, " ")}
		if c := te.code(); c == parley.ENOTFOUND || c == parley.ECLOSED {
			return errGone
		}
		return fmt.Errorf("%s: %w", name, te)
	}
	if out == nil {
		return nil
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		return fmt.Errorf("%s: its answer: %w", name, err)
	}
	return nil
}
