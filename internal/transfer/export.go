// Package transfer moves conversations in and out of Parley: export as
// Markdown for people or as JSON / JSON Lines for machines, and import of
// those exports (same messages, parts, turns, threads and seqs, a new epoch)
// and of legacy message rows (with a warning per oddity).
//
// Exports are consistent: they are read from a snapshot of the store, which
// no writer waits for, a page of bounded size at a time. Imports stream:
// memory stays bounded by the batch size, not the file.
package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/store"
)

// Format is an export format.
type Format string

// Export formats.
const (
	// Markdown is for people: numbered, labelled messages grouped by turn.
	Markdown Format = "markdown"
	// JSON is one document: header, events, messages.
	JSON Format = "json"
	// JSONL is JSON Lines: a header line, one line per event, one per message.
	JSONL Format = "jsonl"
)

// ParseFormat returns the format named s ("" is JSON), or EINVALIDVALUE.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "":
		return JSON, nil
	case Markdown, JSON, JSONL:
		return f, nil
	case "md":
		return Markdown, nil
	case "ndjson":
		return JSONL, nil
	}
	return "", parley.Errorf(parley.EINVALIDVALUE, "format %q is not one of markdown, json, jsonl", s)
}

// ContentType is the media type of an export in format f.
func (f Format) ContentType() string {
	switch f {
	case Markdown:
		return "text/markdown; charset=utf-8"
	case JSONL:
		return "application/x-ndjson"
	}
	return "application/json"
}

// Extension is the file name extension of format f.
func (f Format) Extension() string {
	switch f {
	case Markdown:
		return ".md"
	case JSONL:
		return ".jsonl"
	}
	return ".json"
}

// Version is the version of the export format this package writes and reads.
const Version = 1

// Header opens an export: in JSON its top-level fields, in JSONL its first line.
type Header struct {
	// Parley is always "export"; it tells an export from legacy rows.
	Parley       string              `json:"parley"`
	Version      int                 `json:"version"`
	Conversation parley.Conversation `json:"conversation"`
	// LastSeq is the seq of the last event in the export.
	LastSeq int64 `json:"lastSeq"`
}

// line is one line of a JSONL export after the header: an event or a message.
type line struct {
	Event   *parley.Event   `json:"event,omitempty"`
	Message *parley.Message `json:"message,omitempty"`
}

// page is how many events or messages are read from the store at a time,
// and pageBytes about how many bytes of them: a page of large messages
// ends early, so that an export holds about a page at a time whatever
// the conversation holds.
const (
	page      = 1000
	pageBytes = 4 << 20
)

// Stats counts what an export wrote.
type Stats struct {
	Events   int64 `json:"events"`
	Messages int64 `json:"messages"`
	// Heuristic counts the legacy messages whose reply status the Markdown
	// export decided by the timestamp heuristic (no explicit reply named them).
	Heuristic int `json:"heuristic"`
}

// Export writes conversation id to w in format f, as it is at one moment:
// it reads a snapshot of the store (reads.Reader.At), which no writer
// waits for, a page at a time. The snapshot is held until Export returns, so w
// should take what it is given at once (the API spools it to a file). It
// returns ENOTFOUND for an unknown conversation.
func Export(ctx context.Context, rd *reads.Reader, id string, f Format, w io.Writer) (Stats, error) {
	// A write that fails (a spool past its bound) ends the reading too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &stopOnError{w: w, stop: cancel}
	var st Stats
	err := rd.At(ctx, id, func(snap *reads.Snapshot) error {
		bw := bufio.NewWriterSize(out, 256<<10)
		var err error
		if f == Markdown {
			st, err = writeMarkdown(ctx, snap, bw)
		} else {
			st, err = writeJSON(ctx, snap.Store, snap.State, f, bw)
		}
		if err != nil {
			return err
		}
		return bw.Flush()
	})
	if out.err != nil {
		return st, out.err
	}
	return st, err
}

// stopOnError is a writer that keeps the first error of w and calls stop
// then.
type stopOnError struct {
	w    io.Writer
	stop func()
	err  error
}

func (s *stopOnError) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
		s.stop()
	}
	return n, err
}

// writeJSON writes the header, every event up to s.LastSeq and every message
// row, as one JSON document or as JSON Lines.
func writeJSON(ctx context.Context, st store.Reader, s conv.State, f Format, w *bufio.Writer) (Stats, error) {
	var stats Stats
	h := Header{Parley: "export", Version: Version, Conversation: s.Conversation, LastSeq: s.LastSeq}
	head, err := json.Marshal(h)
	if err != nil {
		return stats, err
	}
	if f == JSONL {
		w.Write(head)
		w.WriteByte('\n')
	} else {
		// The header's fields, then the two arrays, in one object.
		w.Write(head[:len(head)-1])
		w.WriteString(`,"events":[`)
	}
	id := s.Conversation.ID
	// Events and rows are written as they are stored, without decoding and
	// encoding them again: parley.Event.AppendJSON writes what
	// json.Marshal would.
	var buf []byte
	put := func(kind string, n int64, raw []byte) {
		if f == JSONL {
			w.WriteString(`{"` + kind + `":`)
		} else if n > 0 {
			w.WriteByte(',')
		}
		w.Write(raw)
		if f == JSONL {
			w.WriteString("}\n")
		}
	}
	err = eachEvent(ctx, st, id, s.LastSeq, func(e *parley.Event) error {
		buf = e.AppendJSON(buf[:0])
		put("event", stats.Events, buf)
		stats.Events++
		return nil
	})
	if err != nil {
		return stats, err
	}
	if f == JSON {
		w.WriteString(`],"messages":[`)
	}
	for after := int64(0); ; {
		rows, err := st.ListMessagesRaw(ctx, store.ListMessagesParams{ConversationID: id, After: after, Limit: page, MaxBytes: pageBytes})
		if err != nil {
			return stats, err
		}
		if len(rows) == 0 {
			break
		}
		after = rows[len(rows)-1].Seq
		for i, r := range rows {
			data, err := store.WireRow(r.Data)
			if err != nil {
				return stats, err
			}
			put("message", stats.Messages, data)
			stats.Messages++
			rows[i].Data = nil // written: let it go
		}
	}
	if f == JSON {
		w.WriteString("]}\n")
	}
	return stats, nil
}

// eachEvent calls fn for every event of conversation id up to last, in order.
func eachEvent(ctx context.Context, st store.Reader, id string, last int64, fn func(*parley.Event) error) error {
	log := &events{r: st, id: id, last: last}
	for {
		e, err := log.next(ctx)
		if e == nil || err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// events reads a conversation's log up to seq last, in order, a page at
// a time.
type events struct {
	r     store.Reader
	id    string
	last  int64
	after int64 // the seq of the last event returned
	page  []parley.Event
}

// next returns the next event, or nil after the last.
func (l *events) next(ctx context.Context) (*parley.Event, error) {
	if len(l.page) == 0 {
		if l.after >= l.last {
			return nil, nil
		}
		p, err := l.r.ReadEvents(ctx, store.ReadEventsParams{ConversationID: l.id, After: l.after, Limit: page, MaxBytes: pageBytes})
		if err != nil {
			return nil, err
		}
		if len(p) == 0 {
			return nil, fmt.Errorf("conversation %s: the log ends at seq %d, not %d", l.id, l.after, l.last)
		}
		l.page = p
	}
	e := &l.page[0]
	l.page = l.page[1:]
	if e.Seq > l.last {
		l.after, l.page = l.last, nil
		return nil, nil
	}
	l.after = e.Seq
	return e, nil
}

// eachHead calls fn with the head of every message row of conversation
// id, in seq order: the message without its parts, content, metadata and
// legacy marks (store.ReadRowHead), which a row gives without its text
// being decoded.
func eachHead(ctx context.Context, st store.Reader, id string, fn func(*parley.Message) error) error {
	for after := int64(0); ; {
		rows, err := st.ListMessagesRaw(ctx, store.ListMessagesParams{ConversationID: id, After: after, Limit: page, MaxBytes: pageBytes})
		if err != nil || len(rows) == 0 {
			return err
		}
		after = rows[len(rows)-1].Seq
		for i, r := range rows {
			m, _, err := store.ReadRowHead(r.Data)
			if err == nil {
				err = fn(m)
			}
			if err != nil {
				return err
			}
			rows[i].Data = nil // done: let it go
		}
	}
}
