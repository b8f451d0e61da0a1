package parley

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends e as JSON to b, byte for byte what json.Marshal
// writes, without its reflection: every event of every stream is encoded,
// once per event. Data is appended as stored, compact and HTML-escaped,
// as every writer of the log makes it (json.Marshal, and an import
// normalizes what it reads); empty Data is null.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"conversationId":`...)
	b = AppendJSONString(b, e.ConversationID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"type":`...)
	b = AppendJSONString(b, e.Type)
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, int64(e.Turn), 10)
	if e.TurnID != "" {
		b = append(b, `,"turnId":`...)
		b = AppendJSONString(b, e.TurnID)
	}
	if e.AgentID != "" {
		b = append(b, `,"agentId":`...)
		b = AppendJSONString(b, e.AgentID)
	}
	b = append(b, `,"finality":`...)
	b = AppendJSONString(b, string(e.Finality))
	b = append(b, `,"ts":`...)
	if e.Time.IsZero() {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = e.Time.UTC().AppendFormat(b, TimeLayout)
		b = append(b, '"')
	}
	b = append(b, `,"data":`...)
	if len(e.Data) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, 160+len(e.Data))), nil
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string, escaped as json.Marshal
// escapes it (HTML characters too; invalid UTF-8 as U+FFFD).
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendJSON appends c as JSON to b, byte for byte what json.Marshal
// writes: the form every chunk event's data is stored in.
func (c Chunk) AppendJSON(b []byte) []byte {
	b = append(b, `{"messageId":`...)
	b = AppendJSONString(b, c.MessageID)
	b = append(b, `,"content":`...)
	b = AppendJSONString(b, c.Content)
	if c.Checkpoint {
		b = append(b, `,"checkpoint":true`...)
	}
	return append(b, '}')
}

// ParseChunk reads a chunk event's data. The form AppendJSON writes is
// read without reflection (unless the text holds an escape); any other
// JSON of a chunk is read by encoding/json.
func ParseChunk(data []byte) (Chunk, error) {
	const head, mid = `{"messageId":"`, `","content":"`
	if s := string(data); len(s) > len(head) && s[:len(head)] == head {
		rest := s[len(head):]
		if i := indexQuoteOrBackslash(rest); i >= 0 && rest[i] == '"' && len(rest) > i+len(mid) && rest[i:i+len(mid)] == mid {
			id := rest[:i]
			rest = rest[i+len(mid):]
			if j := indexQuoteOrBackslash(rest); j >= 0 && rest[j] == '"' {
				content, tail := rest[:j], rest[j+1:]
				switch tail {
				case "}":
					return Chunk{MessageID: id, Content: content}, nil
				case `,"checkpoint":true}`:
					return Chunk{MessageID: id, Content: content, Checkpoint: true}, nil
				}
			}
		}
	}
	var c Chunk
	err := json.Unmarshal(data, &c)
	return c, err
}

// indexQuoteOrBackslash returns the index of the first '"' or '\' in s, or
// -1; a control character or invalid UTF-8 counts as '\' (it needs the
// slow path).
func indexQuoteOrBackslash(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i
		case c == '\\' || c < 0x20:
			return i
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return i
			}
			i += size - 1
		}
	}
	return -1
}
