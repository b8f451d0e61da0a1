package runners

import (
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/flatjson"
)

// ParseFrame reads a runner's frame without reflection when every value
// in it is a string, as in a text delta, a create or a finalize: most of a
// runner's traffic. It reports false for anything else (a tool call's
// args, a list of message ids, a key it does not know, invalid JSON), which
// the caller decodes with encoding/json, as strictly as ever; what it does
// read, it reads as encoding/json would.
func ParseFrame(data []byte) (f Frame, ok bool) {
	ok = flatjson.Each(string(data), func(k, v string) bool {
		switch k {
		case "type":
			f.Type = v
		case "conversationId":
			f.ConversationID = v
		case "turnId":
			f.TurnID = v
		case "channelType":
			f.ChannelType = v
		case "channelId":
			f.ChannelID = v
		case "opencodeSessionId":
			f.OpencodeSessionID = v
		case "replyTo":
			f.ReplyTo = v
		case "delta":
			f.Delta = v
		case "content":
			f.Content = v
		case "callId":
			f.CallID = v
		case "toolName":
			f.ToolName = v
		case "status":
			f.Status = v
		case "error":
			f.Error = v
		case "reason":
			f.Reason = v
		case "finalText":
			f.FinalText = v
		case "finality":
			f.Finality = parley.Finality(v)
		case "retryOf":
			f.RetryOf = v
		case "messageId":
			f.MessageID = v
		case "requestId":
			f.RequestID = v
		default:
			return false
		}
		return true
	})
	return f, ok
}
