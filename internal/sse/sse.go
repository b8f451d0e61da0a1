// Package sse reads a text/event-stream (Server-Sent Events, as the HTML
// standard defines them) one event at a time, holding at most a bound of
// bytes for one event. The Go SDK's conversation streams, its OpenCode
// bridge and the A2A client read their streams with it; each maps its
// errors to its own.
//
// Lines end in LF or CRLF (a lone CR does not end a line). A line that
// starts with a colon is a comment; the fields read are event, data and id,
// and the others (retry among them) are skipped. A blank line ends an
// event, which is returned if it had a data line.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrTooLarge is returned when an event's data, with the line being read,
// is over the Reader's bound. The stream cannot be read further.
var ErrTooLarge = errors.New("sse: an event is over the size limit")

// Event is one event of a stream.
type Event struct {
	// Type is the value of the event's event field; empty if it has none.
	Type string
	// ID is the stream's last event ID as of this event: the value of the
	// latest id field, in this event or an earlier one (as EventSource
	// keeps it); empty if there was none.
	ID string
	// Data is the values of the event's data lines, joined by newlines.
	Data []byte
}

// Reader reads the events of one stream.
type Reader struct {
	r       *bufio.Reader
	max     int
	id      string
	started bool  // the first line was read (its byte order mark dropped)
	eof     bool  // the last line ended without a newline
	err     error // the error Next returned, returned again
}

// NewReader returns a Reader of r that holds at most max bytes for one
// event: its data and the line being read (a line counts with its field
// name and its line ending). A *bufio.Reader of 64 KiB or more is read as
// it is; any other reader is buffered.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next event. It returns io.EOF when the stream ends
// between events (after a blank line, or after comments only),
// io.ErrUnexpectedEOF when it ends within one (after an event, data or id
// field, but before the blank line that ends the event), ErrTooLarge for
// an event over the bound, and the underlying reader's other errors as
// they are. After an error, Next returns it again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	r.err = err
	return ev, err
}

func (r *Reader) next() (Event, error) {
	var ev Event
	inEvent, hasData := false, false
	for {
		line, err := r.line(r.max - len(ev.Data))
		if err == io.EOF && inEvent {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.ID = r.id
				return ev, nil
			}
			ev, inEvent = Event{}, false
			continue
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(name) {
		case "": // a comment
		case "event":
			ev.Type, inEvent = string(value), true
		case "data":
			if hasData {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, value...)
			hasData, inEvent = true, true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.id = string(value)
			}
			inEvent = true
		}
	}
}

// line reads one line of at most max bytes (its line ending included) and
// returns it without its line ending; io.EOF when the stream has ended. A
// last line without its newline is a line. What it returns is valid until
// the next read.
func (r *Reader) line(max int) ([]byte, error) {
	if r.eof {
		return nil, io.EOF
	}
	var b []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		if len(b)+len(chunk) > max {
			return nil, ErrTooLarge
		}
		if err == bufio.ErrBufferFull {
			b = append(b, chunk...)
			continue
		}
		if b != nil {
			chunk = append(b, chunk...)
		}
		if err == io.EOF && len(chunk) > 0 {
			r.eof, err = true, nil
		}
		if err != nil {
			return nil, err
		}
		chunk = bytes.TrimSuffix(chunk, []byte{'\n'})
		chunk = bytes.TrimSuffix(chunk, []byte{'\r'})
		if !r.started {
			r.started = true
			chunk = bytes.TrimPrefix(chunk, []byte("\ufeff"))
		}
		return chunk, nil
	}
}
