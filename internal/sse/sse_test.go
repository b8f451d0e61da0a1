package sse

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// ev is an expected event, as "type|id|data".
type ev struct{ typ, id, data string }

// TestReader reads each stream to its end: the events it yields, then the
// error that ends it.
func TestReader(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 150<<10) // over bufio's buffer: read in chunks
	for _, c := range []struct {
		name string
		in   string
		max  int
		want []ev
		err  error
	}{
		{"framing", "id: 1\nevent: init\ndata: {}\n\nevent: message\ndata: x\n\nid: 3\ndata: y\n\n", 0,
			[]ev{{"init", "1", "{}"}, {"message", "1", "x"}, {"", "3", "y"}}, io.EOF},
		{"comments", ": hello\n\n: ping\ndata: a\n: ping\n\n: ping\n\n", 0, []ev{{"", "", "a"}}, io.EOF},
		{"comments only", ": ping\n\n: ping\n", 0, nil, io.EOF},
		{"empty stream", "", 0, nil, io.EOF},
		{"multi-line data", "data: {\"a\":\ndata: 1}\ndata:\ndata:  two spaces\n\n", 0,
			[]ev{{"", "", "{\"a\":\n1}\n\n two spaces"}}, io.EOF},
		{"CRLF", "event: x\r\ndata: 1\r\ndata: 2\r\n\r\n: c\r\n\r\n", 0, []ev{{"x", "", "1\n2"}}, io.EOF},
		{"unknown fields and retry skipped", "retry: 10\nfoo: bar\nevent: x\ndata: 1\nbaz\n\n", 0, []ev{{"x", "", "1"}}, io.EOF},
		{"a field without a colon", "data\ndata\n\n", 0, []ev{{"", "", "\n"}}, io.EOF},
		{"an empty data line is an event", "data:\n\n", 0, []ev{{"", "", ""}}, io.EOF},
		{"no data: no event, its type forgotten", "event: lost\nid: 7\n\ndata: z\n\n", 0, []ev{{"", "7", "z"}}, io.EOF},
		{"an id with NUL is ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nid:\ndata: c\n\n", 0,
			[]ev{{"", "1", "a"}, {"", "1", "b"}, {"", "", "c"}}, io.EOF},
		{"a byte order mark at the start", "\ufeffdata: a\n\n", 0, []ev{{"", "", "a"}}, io.EOF},
		{"a last line without newline, between events", "data: a\n\n: bye", 0, []ev{{"", "", "a"}}, io.EOF},
		{"a last line without newline, in an event", "data: a\n\ndata: b", 0, []ev{{"", "", "a"}}, io.ErrUnexpectedEOF},
		{"cut after data", "data: a\n\ndata: b\n", 0, []ev{{"", "", "a"}}, io.ErrUnexpectedEOF},
		{"cut after event", "event: x\n", 0, nil, io.ErrUnexpectedEOF},
		{"cut after id", "id: 1\n: c\n", 0, nil, io.ErrUnexpectedEOF},
		{"one long line", "data: " + strings.Repeat("x", 1001) + "\n\n", 1000, nil, ErrTooLarge},
		{"many data lines", strings.Repeat("data: "+strings.Repeat("y", 90)+"\n", 12) + "\n", 1000, nil, ErrTooLarge},
		{"an endless line", "data: " + strings.Repeat("z", 200<<10), 1000, nil, ErrTooLarge},
		{"an endless comment", ": " + strings.Repeat("z", 200<<10), 1000, nil, ErrTooLarge},
		{"just under", "data: " + strings.Repeat("w", 980) + "\n\n", 1000, []ev{{"", "", strings.Repeat("w", 980)}}, io.EOF},
		{"the bound is per event", strings.Repeat("data: "+strings.Repeat("v", 600)+"\n\n", 3), 1000,
			[]ev{{"", "", strings.Repeat("v", 600)}, {"", "", strings.Repeat("v", 600)}, {"", "", strings.Repeat("v", 600)}}, io.EOF},
		{"a line longer than the buffer", "data: " + big + "\r\n\r\n", 1 << 20, []ev{{"", "", big}}, io.EOF},
	} {
		max := c.max
		if max == 0 {
			max = 1 << 10
		}
		r := NewReader(strings.NewReader(c.in), max)
		for i, w := range c.want {
			got, err := r.Next()
			if err != nil || got.Type != w.typ || got.ID != w.id || string(got.Data) != w.data {
				t.Fatalf("%s: event %d = %q %q %.40q, %v; want %q %q %.40q", c.name, i, got.Type, got.ID, got.Data, err, w.typ, w.id, w.data)
			}
		}
		got, err := r.Next()
		if err != c.err {
			t.Errorf("%s: after %d events: %q %.40q, %v; want %v", c.name, len(c.want), got.Type, got.Data, err, c.err)
		}
		if _, again := r.Next(); again != err {
			t.Errorf("%s: Next after %v = %v", c.name, err, again)
		}
	}
}

// TestReaderErrors: the underlying reader's error is returned as it is,
// and again after; a *bufio.Reader is read as it is, with what it had
// buffered.
func TestReaderErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 1<<10)
	if got, err := r.Next(); err != nil || string(got.Data) != "a" {
		t.Fatalf("first event: %q, %v", got.Data, err)
	}
	for range 2 {
		if _, err := r.Next(); err != boom {
			t.Fatalf("cut by an error: %v, want %v", err, boom)
		}
	}
	br := bufio.NewReaderSize(strings.NewReader(": x\n\ndata: 1\n\n"), 64<<10)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if got, err := NewReader(br, 1<<10).Next(); err != nil || string(got.Data) != "1" {
		t.Fatalf("over a bufio.Reader: %q, %v", got.Data, err)
	}
}
