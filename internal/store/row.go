package store

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley"
)

// A message row is stored as the message's JSON, as clients read it, but
// for its content. A message's content is the text of its text parts, one
// after the other, in all but a few messages (one whose writer ended it
// with a longer final text, some imported ones), so a row leaves content out
// when it is that, and every read puts it back: the text is stored once.
// Backends write rows with EncodeRow and read them with DecodeRow,
// ReadRowHead or WireRow; nothing but these reads a row's JSON whole.

// storedRow is a row that leaves content out: its Content, nil, shadows
// the message's.
type storedRow struct {
	*parley.Message
	Content *string `json:"content,omitempty"`
}

// EncodeRow returns the stored form of m: its JSON, without content when
// content is the text of its text parts.
func EncodeRow(m *parley.Message) ([]byte, error) {
	if !contentIsText(m) {
		return json.Marshal(m)
	}
	return json.Marshal(storedRow{Message: m})
}

// contentIsText reports whether m's content is the text of its text parts,
// without building that text.
func contentIsText(m *parley.Message) bool {
	rest := m.Content
	for _, p := range m.Parts {
		if p.Type == parley.PartText {
			if !strings.HasPrefix(rest, p.Text) {
				return false
			}
			rest = rest[len(p.Text):]
		}
	}
	return rest == ""
}

// DecodeRow reads a stored row into m and returns the size of m in JSON,
// as clients read it (the row's, plus the content it left out).
func DecodeRow(data []byte, m *parley.Message) (int, error) {
	r := storedRow{Message: m}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, err
	}
	if r.Content != nil {
		m.Content = *r.Content
		return len(data), nil
	}
	m.Content = parley.TextContent(m.Parts)
	return len(data) + len(contentKey) + jsonStringLen(m.Content), nil
}

// contentKey is what a message's JSON holds before its content's value,
// right after its parts.
const contentKey = `,"content":`

// WireRow returns the message JSON clients read for a stored row: the row
// itself when it holds its content, else the message encoded again, which
// is the JSON it was written from.
func WireRow(data []byte) ([]byte, error) {
	if wire, ok := wireOf(data); ok {
		return wire, nil
	}
	return wireRow(data)
}

// wireRow is WireRow with encoding/json: what a row wireOf does not
// expect is read so.
func wireRow(data []byte) ([]byte, error) {
	var m parley.Message
	r := storedRow{Message: &m}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Content != nil {
		return data, nil
	}
	m.Content = parley.TextContent(m.Parts)
	return json.Marshal(&m)
}

// ReadRowHead reads what a summary of a message keeps from a stored row,
// without decoding its text, parts, metadata or legacy marks, and returns
// the size of the whole message in JSON.
func ReadRowHead(data []byte) (*parley.Message, int, error) {
	if head, extra, ok := skimRow(data); ok {
		var m parley.Message
		if err := json.Unmarshal(head, &m); err == nil {
			m.Parts = []parley.Part{}
			return &m, len(data) + extra, nil
		}
	}
	return readRowHead(data)
}

// readRowHead is ReadRowHead with encoding/json: what a row skimRow does
// not expect is read so.
func readRowHead(data []byte) (*parley.Message, int, error) {
	var h rowHead
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, 0, err
	}
	size := len(data)
	if h.Content == nil { // left out: it is the text parts' text
		size += len(contentKey) + 2
		for _, p := range h.Parts {
			if p.Type == parley.PartText && p.Text > 2 {
				size += int(p.Text) - 2 // their JSON strings, less their quotes
			}
		}
	}
	h.Message.Parts = []parley.Part{}
	return &h.Message, size, nil
}

// RowScan reads a page of message rows: it hands each row to visit, which
// returns the size of its message in JSON, until the rows end or their
// sizes reach the page's bound in bytes. Backends write one per query of
// rows and share what is done with the rows (DecodedRows, RawRows).
type RowScan func(visit func(data []byte, seq int64) (int, error)) error

// DecodedRows runs scan and returns its rows' messages, decoded.
func DecodedRows(scan RowScan) ([]*parley.Message, error) {
	var out []*parley.Message
	err := scan(func(data []byte, _ int64) (int, error) {
		m := &parley.Message{}
		size, err := DecodeRow(data, m)
		out = append(out, m)
		return size, err
	})
	return out, err
}

// RawRows runs scan and returns its rows as stored; a page bounded in
// bytes counts the rows' stored size (which is what is held), so that no
// row is read twice to be sized.
func RawRows(scan RowScan) ([]RawMessage, error) {
	var out []RawMessage
	err := scan(func(data []byte, seq int64) (int, error) {
		out = append(out, RawMessage{Seq: seq, Data: data})
		return len(data), nil
	})
	return out, err
}

// rowHead is a message row read without its parts' text, its content,
// metadata and legacy marks.
type rowHead struct {
	parley.Message
	Parts []struct {
		Type string  `json:"type"`
		Text jsonLen `json:"text"`
	} `json:"parts"`
	Content  *jsonLen `json:"content"`
	Metadata jsonLen  `json:"metadata"`
	Legacy   jsonLen  `json:"legacy"`
}

// jsonLen is a JSON value read past: it keeps only its length.
type jsonLen int

// UnmarshalJSON implements json.Unmarshaler.
func (n *jsonLen) UnmarshalJSON(b []byte) error {
	*n = jsonLen(len(b))
	return nil
}

// jsonStringLen is the length of s as encoding/json writes it as a JSON
// string, quotes included: with <, > and & escaped for HTML, U+2028 and
// U+2029 escaped, and each byte of invalid UTF-8 written as \ufffd.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\n' || b == '\r' || b == '\t' || b == '\b' || b == '\f':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}
