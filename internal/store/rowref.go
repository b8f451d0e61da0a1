package store

import (
	"bytes"

	"github.com/parleyhq/parley"
)

// An append that ends a message (its message.updated, or the message event
// of one posted whole) writes the message's JSON twice: as the event's data
// and as the message's row. A message's row changes no more once it ended,
// so the event need not hold the JSON: it is stored at once as a reference
// to the row, as compaction would store it once the message is past the
// retention (see CompactRef), and reads give it the row's JSON, byte for
// byte. Streamed text is then stored twice while it streams (its chunk
// events and its row), not three times. A revert puts the data back into the
// event before the row goes (Unref), as it does for compaction's references.
// An import is the one writer that may write an ended message's row again
// (a legacy import merges later copies of a message into it), so an
// import's events keep their data: compaction, which checks the row again,
// refers them to their rows once the import is done.

// AppendRows is how a backend stores what an append writes beside its
// events' columns, made by EncodeAppend.
type AppendRows struct {
	// Rows are the append's Messages as stored (EncodeRow), in order.
	Rows [][]byte
	// Refs names, for each of the append's Events, the message whose row
	// the event is stored as a reference to (ref column set, data empty),
	// or "" for an event stored with its data. Nil when there is none.
	Refs []string
}

// Ref returns the ref of the append's event i ("" for none).
func (a AppendRows) Ref(i int) string {
	if a.Refs == nil {
		return ""
	}
	return a.Refs[i]
}

// Columns returns what a backend stores in the data and ref columns of
// the append's event i, whose data is data: empty data and the message's
// id for a reference, else data and NULL (nil).
func (a AppendRows) Columns(i int, data []byte) ([]byte, any) {
	if id := a.Ref(i); id != "" {
		return []byte{}, id
	}
	return data, nil
}

// EncodeAppend encodes the message rows of p and decides which of its
// events are stored as references: an event is when it is the one that
// writes the row of a message that has ended (its seq is the row's last
// writer, its type message or message.updated), and the row gives back its
// data exactly (WireRow). Of a message p writes twice, its last row counts.
// An import's events are never references. It refuses (EINVALIDVALUE) an
// append that holds a value a store cannot keep alike (see CheckJSON).
func EncodeAppend(p *AppendParams) (AppendRows, error) {
	var out AppendRows
	if len(p.Messages) > 0 {
		out.Rows = make([][]byte, len(p.Messages))
	}
	for i, m := range p.Messages {
		row, err := EncodeRow(m)
		if err != nil {
			return out, err
		}
		out.Rows[i] = row
	}
	if err := checkAppend(p, out.Rows); err != nil {
		return AppendRows{}, err
	}
	if len(p.Messages) == 0 {
		return out, nil
	}
	if p.Import != nil {
		return out, nil
	}
	var seen map[string]bool // of a message written twice, its last row
	if len(p.Messages) > 1 {
		seen = make(map[string]bool, len(p.Messages))
	}
	for i := len(p.Messages) - 1; i >= 0; i-- {
		m := p.Messages[i]
		if seen[m.ID] {
			continue
		}
		if seen != nil {
			seen[m.ID] = true
		}
		if m.Status == parley.StatusStreaming {
			continue
		}
		rowSeq := max(m.UpdatedSeq, m.Seq) // the event that wrote the row last
		k := int(rowSeq - p.ExpectSeq - 1) // events are dense after ExpectSeq
		if k < 0 || k >= len(p.Events) {
			continue
		}
		e := p.Events[k]
		if e.Seq != rowSeq || e.Type != parley.EventMessage && e.Type != parley.EventMessageUpdated {
			continue
		}
		wire, err := WireRow(out.Rows[i])
		if err != nil {
			return out, err
		}
		if !bytes.Equal(wire, e.Data) {
			continue
		}
		if out.Refs == nil {
			out.Refs = make([]string, len(p.Events))
		}
		out.Refs[k] = m.ID
	}
	return out, nil
}
