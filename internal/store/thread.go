package store

import (
	"slices"

	"github.com/parleyhq/parley"
)

// A thread's messages are found by walking replyTo over the index, which
// reads no row: the walk gives each message's id, seq and the size of its
// row (RowRef). The rows are then read as the bounds allow, so that a
// thread of large messages costs what its answer holds, not what the
// thread holds: a row too large to show, or past the bytes a list may
// hold, is never read with others.

// ThreadParams are the arguments of Store.Ancestors and Store.Descendants.
type ThreadParams struct {
	ConversationID string
	MessageID      string
	// After, for Descendants, keeps those with seq > After: the next page.
	After int64
	// Limit bounds how many are returned (at most 100,000): the nearest
	// ancestors, the first descendants by seq.
	Limit int
	// MaxBytes, if set, bounds the rows read whole by their stored size.
	// Descendants ends its list at the row that brings their sizes to
	// MaxBytes (so it returns one, if there is one). Ancestors reads the
	// nearest rows whole while their sizes stay within MaxBytes, and
	// returns the rest summarized.
	MaxBytes int
	// SummarizeOver, for Ancestors, if set, summarizes each message over
	// that many bytes in JSON (parley.Message.Summarize). A row read only
	// to be summarized is read by itself, so that no two large rows are
	// held at once.
	SummarizeOver int
}

// NoMessage is the ENOTFOUND of a message a conversation does not have.
func NoMessage(conversationID, messageID string) error {
	return parley.Errorf(parley.ENOTFOUND, "message %s not found in conversation %s", messageID, conversationID)
}

// RowRef is a message row as the walk of a thread finds it, without
// reading it: its message's id and seq, and its size as stored.
type RowRef struct {
	ID   string
	Seq  int64
	Size int
}

// WalkScan runs the walk of a thread: it hands visit each message it
// finds, with its level (0: the message walked from). Each backend makes
// one per walk, for Ancestors or Descendants.
type WalkScan func(visit func(level int, r RowRef)) error

// walked runs scan, a walk from p.MessageID, and returns what it found
// beyond the message itself, or ENOTFOUND if it found no message.
func walked(p ThreadParams, scan WalkScan) ([]RowRef, error) {
	var refs []RowRef
	found := false
	err := scan(func(level int, r RowRef) {
		if level == 0 {
			found = true
		} else {
			refs = append(refs, r)
		}
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, NoMessage(p.ConversationID, p.MessageID)
	}
	return refs, nil
}

// Ancestors reads the ancestors of p.MessageID (see ancestorRows): walk is
// the backend's walk up the thread from it, read reads its rows by id.
func Ancestors(p ThreadParams, walk WalkScan, read RowReader) ([]*parley.Message, error) {
	refs, err := walked(p, walk)
	if err != nil {
		return nil, err
	}
	return ancestorRows(refs, p, read)
}

// Descendants reads the descendants of p.MessageID (see descendantRows):
// walk is the backend's walk down the thread from it, read reads its rows
// by id.
func Descendants(p ThreadParams, walk WalkScan, read RowReader) ([]*parley.Message, error) {
	refs, err := walked(p, walk)
	if err != nil {
		return nil, err
	}
	return descendantRows(refs, p, read)
}

// RowReader reads the stored rows of messages of one conversation by id,
// handing each row found to each, in any order. Each backend makes one;
// Ancestors and Descendants read with it.
type RowReader func(ids []string, each func(id string, data []byte) error) error

// descendantRows reads the rows refs name, in their order (seq), up to
// and with the one that brings their sizes to p.MaxBytes, and returns
// their messages: up to the one that brings their sizes in JSON to it (a
// row leaves out its content, which its message's JSON holds). A row gone
// since the walk is left out.
func descendantRows(refs []RowRef, p ThreadParams, read RowReader) ([]*parley.Message, error) {
	size := 0
	for i, r := range refs {
		if size += r.Size; p.MaxBytes > 0 && size >= p.MaxBytes {
			refs = refs[:i+1]
			break
		}
	}
	byID, err := readWhole(refs, read)
	if err != nil {
		return nil, err
	}
	out := make([]*parley.Message, 0, len(refs))
	size = 0
	for _, r := range refs {
		m, ok := byID[r.ID]
		if !ok {
			continue
		}
		out = append(out, m.Message)
		if size += m.size; p.MaxBytes > 0 && size >= p.MaxBytes {
			break
		}
	}
	return out, nil
}

// ancestorRows reads the rows refs name, nearest ancestor first, and
// returns their messages root first: the nearest whole while their rows
// are within p.SummarizeOver each and p.MaxBytes together, and so are
// their messages in JSON; the others summarized, each read by itself. A
// row gone since the walk is left out.
func ancestorRows(refs []RowRef, p ThreadParams, read RowReader) ([]*parley.Message, error) {
	var whole, alone []RowRef
	left := p.MaxBytes
	for _, r := range refs {
		fits := p.SummarizeOver <= 0 || r.Size <= p.SummarizeOver
		if fits && (p.MaxBytes <= 0 || r.Size <= left) {
			whole = append(whole, r)
			left -= r.Size
		} else {
			alone = append(alone, r)
		}
	}
	byID, err := readWhole(whole, read)
	if err != nil {
		return nil, err
	}
	for _, r := range alone {
		err := read([]string{r.ID}, func(id string, data []byte) error {
			head, size, err := ReadRowHead(data)
			if err == nil {
				byID[id] = sized{head.Summarize(size), size}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	// Nearest first, as they were chosen: a row holds less than its
	// message's JSON (it leaves the content out), so the JSON is bounded
	// again.
	out := make([]*parley.Message, 0, len(refs))
	left = p.MaxBytes
	for _, r := range refs {
		m, ok := byID[r.ID]
		if !ok {
			continue
		}
		if m.Summarized == nil && (p.SummarizeOver > 0 && m.size > p.SummarizeOver || p.MaxBytes > 0 && m.size > left) {
			m.Message = m.Summarize(m.size)
		} else if m.Summarized == nil {
			left -= m.size
		}
		out = append(out, m.Message)
	}
	slices.Reverse(out)
	return out, nil
}

// sized is a message with its size in JSON.
type sized struct {
	*parley.Message
	size int
}

// readWhole reads and decodes the rows refs name, by id.
func readWhole(refs []RowRef, read RowReader) (map[string]sized, error) {
	byID := make(map[string]sized, len(refs))
	if len(refs) == 0 {
		return byID, nil
	}
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	err := read(ids, func(id string, data []byte) error {
		m := &parley.Message{}
		size, err := DecodeRow(data, m)
		byID[id] = sized{m, size}
		return err
	})
	return byID, err
}
