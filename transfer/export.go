// Package transfer moves conversations in and out of Parley: export as
// Markdown for people or as JSON / JSON Lines for machines, and import of
// those exports (same messages, parts, turns, threads and seqs, a new epoch)
// and of legacy message rows (with a warning per oddity).
//
// Exports are consistent: they are read under the conversation's write lock
// into a spool file, then copied to the reader without holding anything.
// Imports stream: memory stays bounded by the batch size, not the file.
package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/conv"
	"github.com/parleyhq/parley/engine"
	"github.com/parleyhq/parley/store"
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

// page is how many events or messages are read from the store at a time.
const page = 1000

// Stats counts what an export wrote.
type Stats struct {
	Events   int64 `json:"events"`
	Messages int64 `json:"messages"`
	// Heuristic counts the legacy messages whose reply status the Markdown
	// export decided by the timestamp heuristic (no explicit reply named them).
	Heuristic int `json:"heuristic"`
}

// Export writes conversation id to w in format f. It reads a consistent
// snapshot under the conversation's write lock into a temporary file and then
// copies that to w, so a slow reader never holds up writers. It returns
// ENOTFOUND for an unknown conversation.
func Export(ctx context.Context, eng *engine.Engine, id string, f Format, w io.Writer) (Stats, error) {
	spool, err := os.CreateTemp("", "parley-export-*")
	if err != nil {
		return Stats{}, err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	var st Stats
	err = eng.Snapshot(ctx, id, func(s conv.State) error {
		bw := bufio.NewWriterSize(spool, 256<<10)
		var err error
		if f == Markdown {
			st, err = writeMarkdown(ctx, eng.Store(), s, bw)
		} else {
			st, err = writeJSON(ctx, eng.Store(), s, f, bw)
		}
		if err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return st, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return st, err
	}
	_, err = io.Copy(w, spool)
	return st, err
}

// writeJSON writes the header, every event up to s.LastSeq and every message
// row, as one JSON document or as JSON Lines.
func writeJSON(ctx context.Context, st store.Store, s conv.State, f Format, w *bufio.Writer) (Stats, error) {
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
	// encoding them again: appendEvent writes what json.Marshal would.
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
		buf = appendEvent(buf[:0], e)
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
		rows, err := st.ListMessagesRaw(ctx, store.ListMessagesParams{ConversationID: id, After: after, Limit: page})
		if err != nil {
			return stats, err
		}
		for _, r := range rows {
			data, err := store.WireRow(r.Data)
			if err != nil {
				return stats, err
			}
			put("message", stats.Messages, data)
			stats.Messages++
		}
		if len(rows) < page {
			break
		}
		after = rows[len(rows)-1].Seq
	}
	if f == JSON {
		w.WriteString("]}\n")
	}
	return stats, nil
}

// eachEvent calls fn for every event of conversation id up to last, in order.
func eachEvent(ctx context.Context, st store.Store, id string, last int64, fn func(*parley.Event) error) error {
	for after := int64(0); after < last; {
		events, err := st.ReadEvents(ctx, store.ReadEventsParams{ConversationID: id, After: after, Limit: page})
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return fmt.Errorf("conversation %s: the log ends at seq %d, not %d", id, after, last)
		}
		for i := range events {
			if events[i].Seq > last {
				return nil
			}
			if err := fn(&events[i]); err != nil {
				return err
			}
		}
		after = events[len(events)-1].Seq
	}
	return nil
}

// appendEvent appends e as json.Marshal writes it (the tests hold it to
// that), copying its data as stored instead of compacting it again.
func appendEvent(b []byte, e *parley.Event) []byte {
	b = append(b, `{"conversationId":`...)
	b = appendString(b, e.ConversationID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, int64(e.Turn), 10)
	if e.TurnID != "" {
		b = append(b, `,"turnId":`...)
		b = appendString(b, e.TurnID)
	}
	if e.AgentID != "" {
		b = append(b, `,"agentId":`...)
		b = appendString(b, e.AgentID)
	}
	b = append(b, `,"finality":`...)
	b = appendString(b, string(e.Finality))
	b = append(b, `,"ts":`...)
	ts, _ := e.Time.MarshalJSON()
	b = append(b, ts...)
	b = append(b, `,"data":`...)
	if len(e.Data) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string: directly when it needs no
// escaping (ids and names), else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// eachMessage calls fn for every message row of conversation id, in seq order.
func eachMessage(ctx context.Context, st store.Store, id string, fn func(*parley.Message) error) error {
	for after := int64(0); ; {
		ms, err := st.ListMessages(ctx, store.ListMessagesParams{ConversationID: id, After: after, Limit: page})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if err := fn(m); err != nil {
				return err
			}
		}
		if len(ms) < page {
			return nil
		}
		after = ms[len(ms)-1].Seq
	}
}
