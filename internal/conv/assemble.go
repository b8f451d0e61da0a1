package conv

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/parleyhq/parley"
)

// The assembly rules: how a streamed assistant response becomes
// one message with typed parts (a text delta is parley.Message.AppendText
// and a tool update parley.Message.ApplyTool, both shared with the
// clients' fold). They change a message in place and are used
// both when deciding and when rebuilding an in-progress message from its last
// row and the chunks after it, so the two can never disagree.

// ToolUpdate is one status change of a tool call.
type ToolUpdate struct {
	CallID   string          `json:"callId"`
	ToolName string          `json:"toolName"`
	Status   string          `json:"status"`
	Args     json.RawMessage `json:"args,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Part is the update as a tool-call part, as parley.Message.ApplyTool
// takes it.
func (u ToolUpdate) Part() parley.Part {
	return parley.Part{Type: parley.PartToolCall, CallID: u.CallID, ToolName: u.ToolName, Status: u.Status, Args: u.Args, Result: u.Result, Error: u.Error}
}

// changes returns the part a tool update writes to the log: the call's id
// and status, and of its tool name, args, result and error those that
// differ from what the message holds (all of them for a new call). Applied
// with parley.Message.ApplyTool, it changes the message as the whole
// update would, and what the log holds of a call stays linear in what
// changed.
func changes(m *parley.Message, u ToolUpdate) parley.Part {
	p := u.Part()
	for _, old := range m.Parts {
		if old.Type != parley.PartToolCall || old.CallID != u.CallID {
			continue
		}
		if p.ToolName == old.ToolName {
			p.ToolName = ""
		}
		if p.Args != nil && bytes.Equal(p.Args, old.Args) {
			p.Args = nil
		}
		if p.Result != nil && bytes.Equal(p.Result, old.Result) {
			p.Result = nil
		}
		if p.Error == old.Error {
			p.Error = ""
		}
		break
	}
	return p
}

// unfinishedCall is the error Finalize gives a tool call left running.
const unfinishedCall = "the response ended before the tool call finished"

// notesBytes is how much of a message's size the notes Finalize adds to
// the tool calls left running make: the server's words, which are not
// counted against the message's bound (a message can always be ended).
func notesBytes(m *parley.Message) int {
	n := 0
	for _, p := range m.Parts {
		if p.Type == parley.PartToolCall && p.Status == parley.ToolError && p.Error == unfinishedCall {
			n += len(unfinishedCall)
		}
	}
	return n
}

// Finalize ends a message: text parts stop streaming, tool calls still pending
// or running become errors, the rest of finalText (what it has past the text
// streamed, which it must start with: see CheckFinalText) is added as text, a
// finish part with the reason is appended (after an error part when errText
// is set), content is the plain text of the text parts, and the status
// follows the reason.
func Finalize(m *parley.Message, reason, errText, finalText string) {
	closeText(m)
	if streamed := parley.TextContent(m.Parts); len(finalText) > len(streamed) && strings.HasPrefix(finalText, streamed) {
		rest := finalText[len(streamed):]
		if n := len(m.Parts); n > 0 && m.Parts[n-1].Type == parley.PartText {
			m.Parts[n-1].Text += rest // the text goes on in the last part
		} else {
			m.Parts = append(m.Parts, parley.Part{Type: parley.PartText, Text: rest})
		}
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Type == parley.PartToolCall && (p.Status == parley.ToolPending || p.Status == parley.ToolRunning) {
			p.Status = parley.ToolError
			if p.Error == "" {
				p.Error = unfinishedCall
			}
		}
	}
	if errText != "" {
		m.Parts = append(m.Parts, parley.Part{Type: parley.PartError, Message: errText})
		reason = parley.FinishError
	}
	m.Parts = append(m.Parts, parley.Part{Type: parley.PartFinish, Reason: reason})
	m.Content = parley.TextContent(m.Parts)
	switch reason {
	case parley.FinishCanceled:
		m.Status = parley.StatusCanceled
	case parley.FinishError:
		m.Status = parley.StatusError
	default:
		m.Status = parley.StatusComplete
	}
}

// CheckFinalText refuses a finalText that would make a message's content
// disagree with its parts: one other than the text streamed so far that
// does not start with it (an empty finalText, or the streamed text itself,
// changes nothing). A finalText that goes on past the streamed text needs
// room for its rest: the last part if it is text, else one more part.
func CheckFinalText(m *parley.Message, finalText string, l Limits) error {
	streamed := parley.TextContent(m.Parts)
	switch {
	case finalText == "" || finalText == streamed:
		return nil
	case !strings.HasPrefix(finalText, streamed):
		return parley.Errorf(parley.EINVALIDVALUE, "finalText (%d bytes) does not start with the %d bytes of text message %s streamed; a finalText may only add text after what was streamed (leave it out to keep the streamed text)",
			len(finalText), len(streamed), m.ID)
	}
	if n := len(m.Parts); (n == 0 || m.Parts[n-1].Type != parley.PartText) && n >= l.MaxParts {
		return parley.Errorf(parley.ETOOLARGE, "message %s has %d parts; the limit is %d, and the rest of finalText needs one more", m.ID, n, l.MaxParts)
	}
	return nil
}

// Finished reports whether a message has its finish part.
func Finished(m *parley.Message) bool {
	return slices.ContainsFunc(m.Parts, func(p parley.Part) bool { return p.Type == parley.PartFinish })
}

func closeText(m *parley.Message) {
	for i := range m.Parts {
		m.Parts[i].Streaming = false
	}
}
