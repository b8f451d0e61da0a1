package protocols

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/transport"
)

// sseOut writes the data-only Server-Sent Events of the chat protocols
// (the AI SDK's UI message stream, AG-UI): "id:" when given, then one
// "data:" line per event, each batch of events flushed once, with a write
// deadline per batch so that a client that stops reading is dropped.
type sseOut struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	bw    *bufio.Writer
	limit time.Duration
	armed bool
}

// startSSE answers 200 with the headers of an event stream (and extra,
// name then value) and returns its writer. Call done when the stream ends.
func (s *Server) startSSE(w http.ResponseWriter, extra ...string) *sseOut {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	w.WriteHeader(http.StatusOK)
	return &sseOut{w: w, rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 32<<10), limit: s.opts.WriteTimeout}
}

func (o *sseOut) arm() {
	if !o.armed {
		_ = o.rc.SetWriteDeadline(time.Now().Add(o.limit))
		o.armed = true
	}
}

// data writes one event: an id line if id is not empty, and a data line.
// Data is JSON, which holds no line break.
func (o *sseOut) data(id string, data []byte) error {
	o.arm()
	if id != "" {
		o.bw.WriteString("id: ")
		o.bw.WriteString(id)
		o.bw.WriteByte('\n')
	}
	o.bw.WriteString("data: ")
	o.bw.Write(data)
	_, err := o.bw.WriteString("\n\n")
	return err
}

// ping writes a comment, which clients ignore and proxies see as traffic.
func (o *sseOut) ping() error {
	o.arm()
	_, err := o.bw.WriteString(": ping\n\n")
	return err
}

// flush sends what was written.
func (o *sseOut) flush() error {
	o.arm()
	if err := o.bw.Flush(); err != nil {
		return err
	}
	if err := o.rc.Flush(); err != nil {
		return err
	}
	o.armed = false
	return nil
}

// done clears the write deadline, so that it cannot outlive the response
// on a kept-alive connection.
func (o *sseOut) done() { _ = o.rc.SetWriteDeadline(time.Time{}) }

// errReplaced ends following an answer whose conversation's history was
// replaced (an import under its id): the position followed is no longer in
// it.
var errReplaced = parley.Errorf(parley.ENOTFOUND, "the conversation's history was replaced; the answer followed is no longer in it")

// errRestartRun is what an emit returns to end following an answer whose
// steps, up to the position a client resumes from, are no longer those it
// was sent: the caller sends the answer again from its start.
var errRestartRun = errors.New("the answer's events before the position were compacted")

// errPaused is what an emit returns to end a stream that paused: the
// answer waits for an input request its protocol asks the client to
// answer in a request of its own (an approval for the AI SDK, an
// interrupt for AG-UI). The stream ends well formed; the answer goes on.
var errPaused = errors.New("the answer waits for input")

// followAnswer reads conversation id's log after position from, folds every
// event into a, and hands each event's steps (with the event's seq) to
// emit, then flushes each batch of events once; it pings out after
// HeartbeatInterval of silence. A subscription dropped for falling behind
// is taken up again from the last event read, so that a slow client loses
// nothing. It returns nil once the answer ended or paused (errPaused), transport.ErrClientGone when the
// client left, or why the server ended it (the token was revoked, the
// conversation deleted or replaced, the server shutting down).
func (s *Server) followAnswer(ctx context.Context, id string, from parley.Position, a *answerState, out *sseOut, emit func([]step, int64) error) error {
	// The headers, and what was written before, go out at once: the client
	// learns that its request was taken before the answer begins, and, with
	// them, whether its question waits for a runner.
	steps := s.statusSteps(ctx, id, a, nil)
	if len(steps) > 0 && emit(steps, from.Seq) != nil || out.flush() != nil {
		return transport.ErrClientGone
	}
	t := time.NewTicker(s.opts.Heartbeat)
	defer t.Stop()
	for {
		sub, err := s.eng.Subscribe(ctx, id, &from)
		if err != nil {
			return transport.CutOff(ctx, err)
		}
		if !sub.Init.Recovered {
			sub.Close()
			return errReplaced
		}
		from.Epoch = sub.Init.Position.Epoch
		// status says, while the answer has not begun, whether its prompt
		// waits for a runner (answer_status.go).
		status := func() error {
			if steps = s.statusSteps(ctx, id, a, steps[:0]); len(steps) > 0 && (emit(steps, from.Seq) != nil || out.flush() != nil) {
				return transport.ErrClientGone
			}
			return nil
		}
		if err := status(); err != nil {
			sub.Close()
			return err
		}
		// read handles one item; stop is true once the answer ended.
		read := func(it feed.Item) (stop bool, err error) {
			ev := it.Event
			if ev == nil {
				return false, status() // guidance: a runner may have come or gone
			}
			if ctx.Err() != nil {
				return true, transport.ErrClientGone // ended by the server (see transport.CutOff) or the client
			}
			steps = a.apply(*ev, steps[:0])
			from.Seq = ev.Seq
			if err := emit(steps, ev.Seq); errors.Is(err, errRestartRun) {
				return true, err
			} else if errors.Is(err, errPaused) {
				return true, nil
			} else if err != nil {
				return true, transport.ErrClientGone
			}
			return a.ended(), nil
		}
		end := func() error {
			defer sub.Close()
			for {
				select {
				case it, ok := <-sub.C:
					// This item, then every item already waiting, then one flush.
					for more := true; more; {
						if !ok {
							return flushed(out, transport.SubEnd(sub))
						}
						sub.Took(it)
						stop, err := read(it)
						if err != nil {
							return err
						}
						if stop {
							return flushed(out, nil)
						}
						select {
						case it, ok = <-sub.C:
						default:
							more = false
						}
					}
					if out.flush() != nil {
						return transport.ErrClientGone
					}
					t.Reset(s.opts.Heartbeat)
				case <-t.C:
					if out.ping() != nil || out.flush() != nil {
						return transport.ErrClientGone
					}
				case <-ctx.Done():
					return transport.ErrClientGone
				}
			}
		}()
		if parley.ErrorCode(end) == parley.EBUSY {
			continue // dropped for falling behind: take it up again from the last event read
		}
		return transport.CutOff(ctx, end)
	}
}

// flushed flushes what was written before an end, and returns why it ended.
func flushed(out *sseOut, end error) error {
	if out.flush() != nil {
		return transport.ErrClientGone
	}
	return end
}
