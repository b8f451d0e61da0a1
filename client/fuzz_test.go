package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
)

// FuzzStreamFrames feeds a Stream arbitrary server output, parsed as SSE,
// frame by frame (at most 64). It must never panic, never yield an event
// out of order: an accepted event follows the position by exactly one, a
// skipped one is a duplicate (at or before it), and a refused frame leaves
// the position as it was; only an init moves the position elsewhere. No
// frame is larger than the reader's bound. Every frame accepted is folded
// into a Fold, which must hold no text of a summarized message.
func FuzzStreamFrames(f *testing.F) {
	ev := func(seq string) string {
		return "id: e1:" + seq + "\nevent: message\ndata: {\"conversationId\":\"c\",\"seq\":" + seq + ",\"type\":\"message\",\"turn\":1,\"finality\":\"none\",\"ts\":\"2026-11-22T10:00:00Z\",\"data\":{}}\n\n"
	}
	init := "id: e1:2\nevent: init\ndata: {\"type\":\"init\",\"recovered\":true,\"position\":{\"seq\":2,\"epoch\":\"e1\"}}\n\n"
	for _, s := range []string{
		init + ev("3") + ev("4"),
		init + ev("3") + ev("3") + ev("5"), // a duplicate, then a gap
		init + ": ping\n\nevent: guidance\ndata: {\"type\":\"guidance\",\"data\":{\"turn\":2}}\n\n" + ev("3"),
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"code\":\"busy\",\"message\":\"slow\"}}\n\n",
		strings.ReplaceAll(init+ev("3"), "\n", "\r\n"),
		"data: {\"type\":\"init\",\n" + "data: \"position\":{\"seq\":0}}\n\n" + ev("1"),
		"data: [1,2\n\n", "event: init\ndata: null\n\n", "data: {\"seq\":-1}\n\n",
		// A snapshot with a summarized message, and text and a tool call for it and another.
		"event: init\ndata: {\"type\":\"init\",\"position\":{\"seq\":2,\"epoch\":\"e1\"},\"messages\":[" +
			"{\"id\":\"r1\",\"seq\":2,\"status\":\"streaming\",\"parts\":[],\"updatedSeq\":2,\"summarized\":{\"bytes\":900000}}," +
			"{\"id\":\"r2\",\"seq\":1,\"status\":\"streaming\",\"parts\":[],\"updatedSeq\":2}]}\n\n" +
			"id: e1:3\nevent: chunk\ndata: {\"seq\":3,\"type\":\"chunk\",\"data\":{\"messageId\":\"r1\",\"content\":\"x\"}}\n\n" +
			"id: e1:4\nevent: part.updated\ndata: {\"seq\":4,\"type\":\"part.updated\",\"data\":{\"messageId\":\"r2\",\"part\":{\"callId\":\"c\",\"status\":\"running\"}}}\n\n" +
			"id: e1:5\nevent: part.updated\ndata: {\"seq\":5,\"type\":\"part.updated\",\"data\":{\"messageId\":\"r1\",\"part\":{\"callId\":\"c\",\"args\":{}}}}\n\n",
	} {
		f.Add([]byte(s))
	}
	const max = 4 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newSSEReader(io.NopCloser(bytes.NewReader(data)), func() {}, max)
		s := &Stream{}
		var fold Fold
		defer func() {
			for _, id := range fold.Missing() {
				if m := fold.Message(id); m.Summarized == nil || m.Content != "" || len(m.Parts) != 0 {
					t.Fatalf("summarized %s holds %q %v", id, m.Content, m.Parts)
				}
			}
		}()
		for range 64 {
			typ, frame, err := r.read(context.Background())
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errFrameTooLarge) {
					t.Fatalf("read: %v", err)
				}
				return
			}
			if len(frame) > max {
				t.Fatalf("a frame of %d bytes passed a bound of %d", len(frame), max)
			}
			var before *parley.Position
			if s.pos != nil {
				p := *s.pos
				before = &p
			}
			f, skip, err := s.accept(typ, frame)
			if err == nil && !skip {
				_ = fold.Apply(f)
			}
			switch {
			case err != nil || skip:
				if !samePos(before, s.pos) {
					t.Fatalf("%s frame %q (skip %v, err %v) moved the position from %v to %v", typ, frame, skip, err, before, s.pos)
				}
				if skip {
					// Only a duplicate is skipped: an event at or behind the position.
					var ev struct{ Seq int64 }
					if f.Event != nil || before == nil || json.Unmarshal(frame, &ev) != nil || ev.Seq > before.Seq {
						t.Fatalf("skipped %q at position %v", frame, before)
					}
				}
			case f.Init != nil:
				if s.pos == nil || *s.pos != f.Init.Position {
					t.Fatalf("init at %v left the position at %v", f.Init.Position, s.pos)
				}
			case f.Event != nil:
				if before != nil && f.Event.Seq != before.Seq+1 || s.pos == nil || s.pos.Seq != f.Event.Seq {
					t.Fatalf("event %d yielded after %v; position now %v", f.Event.Seq, before, s.pos)
				}
			default:
				if !samePos(before, s.pos) {
					t.Fatalf("%s frame moved the position from %v to %v", f.Type, before, s.pos)
				}
			}
		}
	})
}

func samePos(a, b *parley.Position) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// TestSSEEventOverTheBound: an SSE event larger than the bound, in one line
// or in many data lines, ends the connection with an error instead of
// growing without end; one just under it is read.
func TestSSEEventOverTheBound(t *testing.T) {
	t.Parallel()
	const max = 1000
	for _, c := range []struct {
		name string
		in   string
		err  error
	}{
		{"one long line", "data: " + strings.Repeat("x", max+1) + "\n\n", errFrameTooLarge},
		{"many data lines", strings.Repeat("data: "+strings.Repeat("y", 90)+"\n", 12) + "\n", errFrameTooLarge},
		{"an endless line", "data: " + strings.Repeat("z", 200<<10), errFrameTooLarge},
		{"just under", "data: " + strings.Repeat("w", max-20) + "\n\n", nil},
	} {
		r := newSSEReader(io.NopCloser(strings.NewReader(c.in)), func() {}, max)
		_, data, err := r.read(context.Background())
		if !errors.Is(err, c.err) || err == nil && len(data) != max-20 {
			t.Errorf("%s: %d bytes, %v; want %v", c.name, len(data), err, c.err)
		}
	}
}
