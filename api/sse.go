package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/engine"
)

// streamSSE serves a conversation as Server-Sent Events. Each event's id is
// "epoch:seq", so a browser's EventSource resumes by itself with
// Last-Event-ID; guidance frames have no id and do not move it.
func (s *Server) streamSSE(w http.ResponseWriter, r *http.Request, _ parley.Identity) {
	from, err := position(r)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, s.log, parley.Errorf(parley.EINTERNAL, "streaming is not supported by this connection"))
		return
	}
	id := r.PathValue("id")
	sub, err := s.eng.Subscribe(r.Context(), id, from)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	epoch := sub.Init.Position.Epoch

	init, err := encodeInit(sub.Init)
	if err != nil {
		return
	}
	fmt.Fprintf(bw, "id: %s:%d\nevent: init\ndata: %s\n\n", epoch, sub.Init.Position.Seq, init)
	if bw.Flush() != nil {
		return
	}
	flusher.Flush()

	// One write deadline per batch, so that a client that stops reading is
	// dropped instead of holding this goroutine.
	rc := http.NewResponseController(w)
	armed := false
	arm := func() {
		if !armed {
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			armed = true
		}
	}
	write := func(it engine.Item) error {
		arm()
		name, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		if it.Event != nil {
			fmt.Fprintf(bw, "id: %s:%d\n", epoch, it.Event.Seq)
		}
		_, err = fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", name, data)
		return err
	}
	end := s.pumpStream(r.Context(), sub, write, func() error {
		arm()
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
		armed = false
		return nil
	}, func() error {
		arm()
		_, err := bw.WriteString(": ping\n\n")
		return err
	})
	if frame := endFrame(end); frame != nil {
		arm()
		fmt.Fprintf(bw, "event: error\ndata: %s\n\n", frame)
		bw.Flush()
		flusher.Flush()
	}
}

// pumpStream moves items from a subscription to a transport: it writes one
// item, then every item already waiting, then flushes once, so that busy
// streams send several events per flush. It pings when idle. It returns why
// the stream ended: errClientGone, or the subscription's error.
func (s *Server) pumpStream(ctx context.Context, sub *engine.Subscription, write func(engine.Item) error, flush, ping func() error) error {
	t := time.NewTicker(s.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case it, ok := <-sub.C:
			if !ok {
				if err := sub.Err(); err != nil && !errors.Is(err, context.Canceled) {
					return err
				}
				return errClientGone
			}
			if err := write(it); err != nil {
				return errClientGone
			}
		drain:
			for {
				select {
				case it, ok := <-sub.C:
					if !ok {
						break drain
					}
					if err := write(it); err != nil {
						return errClientGone
					}
				default:
					break drain
				}
			}
			if err := flush(); err != nil {
				return errClientGone
			}
		case <-t.C:
			if err := ping(); err != nil || flush() != nil {
				return errClientGone
			}
		case <-ctx.Done():
			return errClientGone
		}
	}
}
