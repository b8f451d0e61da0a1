package conv

import (
	"bytes"
	"encoding/json"
	"slices"

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
// or running become errors, a finish part with the reason is appended (after
// an error part when errText is set), content is the plain text of the text
// parts (or finalText, if given and longer), and the status follows the reason.
func Finalize(m *parley.Message, reason, errText, finalText string) {
	closeText(m)
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
	if len(finalText) > len(m.Content) {
		m.Content = finalText
	}
	switch reason {
	case parley.FinishCanceled:
		m.Status = parley.StatusCanceled
	case parley.FinishError:
		m.Status = parley.StatusError
	default:
		m.Status = parley.StatusComplete
	}
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
