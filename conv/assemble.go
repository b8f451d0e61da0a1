package conv

import (
	"encoding/json"
	"slices"

	"github.com/parleyhq/parley"
)

// The assembly rules of seed 001: how a streamed assistant response becomes
// one message with typed parts. They change a message in place and are used
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

// AppendText applies a text delta: it extends the last part if that is a
// streaming text part, and otherwise starts a new streaming text part (as
// after a tool call). Content grows by the delta.
func AppendText(m *parley.Message, delta string) {
	if n := len(m.Parts); n > 0 && m.Parts[n-1].Type == parley.PartText && m.Parts[n-1].Streaming {
		m.Parts[n-1].Text += delta
	} else {
		m.Parts = append(m.Parts, parley.Part{Type: parley.PartText, Text: delta, Streaming: true})
	}
	m.Content += delta
}

// ApplyTool adds a tool-call part or updates the one with the same callId. A
// new tool call closes the streaming text part, so that text after the tool
// starts a new part. It reports whether the part is new.
func ApplyTool(m *parley.Message, u ToolUpdate) bool {
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Type == parley.PartToolCall && p.CallID == u.CallID {
			p.Status = u.Status
			if u.ToolName != "" {
				p.ToolName = u.ToolName
			}
			if u.Args != nil {
				p.Args = u.Args
			}
			if u.Result != nil {
				p.Result = u.Result
			}
			if u.Error != "" {
				p.Error = u.Error
			}
			return false
		}
	}
	closeText(m)
	m.Parts = append(m.Parts, parley.Part{Type: parley.PartToolCall, CallID: u.CallID, ToolName: u.ToolName, Status: u.Status, Args: u.Args, Result: u.Result, Error: u.Error})
	return true
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
				p.Error = "the response ended before the tool call finished"
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
