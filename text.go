package parley

import (
	"sync"
	"unsafe"
)

// A streaming message grows by a delta at a time, and is copied at every
// step (the decider is pure: it makes the message anew from the one it is
// given). With plain strings every delta would copy the whole text so far,
// twice (its content and its last text part): a message of n deltas would
// cost O(n²) bytes. Instead a message's text lives in a growing byte buffer
// that the message and its copies share: a delta is appended in place, and
// the content and the streaming part are strings over the buffer's bytes.
// Bytes once covered by a string are never written again, so every string
// made from the buffer stays what it was. When the buffer outgrows its room
// and moves, the message's text parts move with it (moveParts), so that
// none keeps the outgrown one alive.

// textBuf holds the bytes of a streaming message's text and the room to
// grow into.
type textBuf struct {
	mu sync.Mutex
	b  []byte
}

// appendShared returns s+delta. If s is the latest text made from *buf (all
// of its bytes), delta goes into the buffer's room, copying nothing (but on
// growth); otherwise (s came from elsewhere, or another copy of the message
// has grown past it) a new buffer is started for the result, and *buf set
// to it.
func appendShared(buf **textBuf, s, delta string) string {
	if delta == "" {
		return s
	}
	if tb := *buf; tb != nil {
		tb.mu.Lock()
		if len(tb.b) == len(s) && len(s) > 0 && unsafe.StringData(s) == &tb.b[0] {
			tb.b = append(tb.b, delta...)
			out := unsafe.String(&tb.b[0], len(tb.b))
			tb.mu.Unlock()
			return out
		}
		tb.mu.Unlock()
	}
	b := make([]byte, 0, max(2*(len(s)+len(delta)), 64))
	b = append(append(b, s...), delta...)
	*buf = &textBuf{b: b}
	return unsafe.String(&b[0], len(b))
}

// moveParts points the text parts that are bytes of old, the content
// before its buffer moved, at the same bytes of the content now. A text
// part closed by a tool call stays as it is; left pointing into the
// buffer it was made in, each would keep an outgrown copy of the text
// alive for as long as the message (one for each tool call: about three
// times the text of a message that calls tools as it streams).
func (m *Message) moveParts(old string) {
	base := uintptr(unsafe.Pointer(unsafe.StringData(old)))
	for i := range m.Parts {
		t := m.Parts[i].Text
		if t == "" {
			continue
		}
		at := uintptr(unsafe.Pointer(unsafe.StringData(t)))
		if at >= base && at+uintptr(len(t)) <= base+uintptr(len(old)) {
			off := int(at - base)
			m.Parts[i].Text = m.Content[off : off+len(t)]
		}
	}
}
