package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/transport/netpoll"
)

// SSE writes conversation id's stream from follower sub as Server-Sent
// Events. Each event's id is "epoch:seq", so a browser's EventSource
// resumes by itself with Last-Event-ID; guidance frames have no id and do
// not move it. ctx is the stream's own (the server ends the stream by
// ending it, with a *parley.Error cause that the error frame tells), leave
// is called once the client left, and done once the stream ended. If no
// init frame can be made, nothing is written: sub is closed, done called,
// and the error returned for the caller to answer.
//
// Over HTTP/1.1 the stream takes the connection over from net/http (the
// response ends with the connection), and SSE returns: the stream is
// written by a goroutine that runs only while there is something to write
// (see streamPump), and the client's leaving (it sends nothing else) is
// seen as it happens, and ends the stream. Where the connection cannot be
// taken over, SSE waits until the stream ends (and net/http says when the
// client leaves).
func (t *Streams) SSE(ctx context.Context, w http.ResponseWriter, r *http.Request, id string, sub *engine.Follower, leave, done func()) error {
	init, epoch, err := startInit(sub)
	if err != nil {
		sub.Close()
		done()
		return err
	}
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
		"X-Accel-Buffering: no\r\nConnection: close\r\n\r\n" // no proxy buffering; the stream ends with the connection
	if r.ProtoMajor == 1 {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			// The client's leaving ends the stream (the writer ends it):
			// seen with no goroutine waiting for it where it can be.
			watch, polled := netpoll.Watch(conn, func() bool {
				if readPast(conn) != nil {
					leave()
					return false
				}
				return true
			})
			out := &sseWriter{t: t, w: conn, deadline: conn.SetWriteDeadline}
			finished := func() {
				watch.Stop() // before the close
				conn.Close()
				done()
			}
			if _, err := io.WriteString(conn, head); err != nil {
				sub.Close()
				finished()
			} else {
				out.stream(ctx, id, epoch, sub, init, finished)
			}
			if !polled {
				go func() {
					for readPast(conn) == nil {
					}
					leave()
				}()
			}
			return nil
		}
	}
	defer done()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sctx, stop := context.WithCancelCause(r.Context())
	defer stop(nil)
	context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })
	out := &sseWriter{t: t, w: w, deadline: rc.SetWriteDeadline, flushDst: rc.Flush}
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	finished := make(chan struct{})
	out.stream(sctx, id, epoch, sub, init, func() { close(finished) })
	<-finished // net/http ends the response when the handler returns
	return nil
}

// readPast reads a taken-over connection, whose client sends nothing after
// its request, once: what it might send is read past; an error says the
// client left (or the connection is closed).
func readPast(conn net.Conn) error {
	var buf [64]byte
	_, err := conn.Read(buf[:])
	return err
}

// sseWriter writes a stream's frames: a batch into a buffer taken from a pool
// for the batch and given back at the flush (an idle stream holds none),
// one write deadline per batch (a client that stops reading is cut off).
type sseWriter struct {
	t        *Streams
	w        io.Writer
	deadline func(time.Time) error
	flushDst func() error // after the buffer is flushed (net/http's own buffer); nil if none
	bw       *bufio.Writer
	armed    bool
	aborted  atomic.Bool // see abort
}

func (o *sseWriter) arm() {
	if !o.armed {
		_ = o.deadline(time.Now().Add(o.t.opts.WriteTimeout))
		o.armed = true
		if o.aborted.Load() {
			_ = o.deadline(time.Now())
		}
	}
}

// abort makes the write under way fail at once, and every write after it.
// Any goroutine may call it.
func (o *sseWriter) abort() {
	o.aborted.Store(true)
	_ = o.deadline(time.Now())
}

// resume undoes an abort that came once no write was under way: writes go
// on. Only the writing goroutine calls it.
func (o *sseWriter) resume() {
	if o.aborted.Swap(false) {
		_ = o.deadline(time.Time{})
		o.armed = false
	}
}

func (o *sseWriter) out() *bufio.Writer {
	o.arm()
	if o.bw == nil {
		o.bw = sseBuffers.Get().(*bufio.Writer)
		o.bw.Reset(o.w)
	}
	return o.bw
}

func (o *sseWriter) frame(evID, name string, data []byte) error {
	bw := o.out()
	if evID != "" {
		bw.WriteString("id: ")
		bw.WriteString(evID)
		bw.WriteByte('\n')
	}
	bw.WriteString("event: ")
	bw.WriteString(name)
	bw.WriteString("\ndata: ")
	bw.Write(data)
	_, err := bw.WriteString("\n\n")
	return err
}

func (o *sseWriter) flush() error {
	o.arm()
	if o.bw != nil {
		err := o.bw.Flush()
		o.bw.Reset(nil)
		sseBuffers.Put(o.bw)
		o.bw = nil
		if err != nil {
			return err
		}
	}
	if o.flushDst != nil {
		if err := o.flushDst(); err != nil {
			return err
		}
	}
	_ = o.deadline(time.Time{})
	o.armed = false
	return nil
}

// stream writes the init frame, then what the follower yields (see
// streamPump: no goroutine is held while the stream is quiet), then the
// error frame of a stream the server ends, and then calls finished. It
// returns once the init frame is written.
func (o *sseWriter) stream(ctx context.Context, id, epoch string, sub *engine.Follower, init []byte, finished func()) {
	eventID := func(seq int64) string { return epoch + ":" + strconv.FormatInt(seq, 10) }
	if writeInit(sub, func() error {
		if err := o.frame(eventID(sub.Init.Position.Seq), "init", init); err != nil {
			return err
		}
		return o.flush()
	}, o.abort, o.resume) != nil {
		sub.Close()
		finished()
		return
	}
	o.t.pump(ctx, sub, func(it feed.Item) error {
		name, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		evID := ""
		if it.Event != nil {
			evID = eventID(it.Event.Seq)
		}
		return o.frame(evID, name, data)
	}, o.flush, func() error {
		_, err := o.out().WriteString(": ping\n\n")
		return err
	}, func(end error) {
		defer finished()
		defer sub.Close()
		if data := o.t.EndFrame(id, end); data != nil {
			if o.frame("", "error", data) == nil {
				_ = o.flush()
			}
		}
	})
}

// sseBuffers hold the buffers SSE streams write a batch of frames into.
var sseBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
