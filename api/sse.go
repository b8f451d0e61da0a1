package api

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/feed"
)

// streamSSE serves a conversation as Server-Sent Events. Each event's id is
// "epoch:seq", so a browser's EventSource resumes by itself with
// Last-Event-ID; guidance frames have no id and do not move it.
func (s *Server) streamSSE(w http.ResponseWriter, r *http.Request, who parley.Identity) {
	from, err := position(r)
	if err == nil {
		err = s.readable(r, who)
	}
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	rc := http.NewResponseController(w)
	id := r.PathValue("id")
	// Revoking the token ends the stream with an error frame.
	ctx, cut := context.WithCancelCause(r.Context())
	defer cut(nil)
	release, ok := s.connect(w, who, cut)
	if !ok {
		return
	}
	defer release()
	sub, err := s.eng.Subscribe(r.Context(), id, from)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}
	defer sub.Close()
	init, epoch, err := startInit(sub)
	if err != nil {
		writeErr(w, s.log, err)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell proxies (nginx) not to buffer
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)

	// One write deadline per batch, so that a client that stops reading is
	// dropped instead of holding this goroutine; cleared when the stream ends
	// so that it cannot outlive this response on a kept-alive connection.
	armed := false
	arm := func() {
		if !armed {
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			armed = true
		}
	}
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	flush := func() error {
		arm()
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
		armed = false
		return nil
	}
	frame := func(evID, name string, data []byte) error {
		arm()
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
	eventID := func(seq int64) string { return epoch + ":" + strconv.FormatInt(seq, 10) }

	if frame(eventID(sub.Init.Position.Seq), "init", init) != nil || flush() != nil {
		return
	}
	end := s.pumpStream(ctx, sub, func(it feed.Item) error {
		name, data, err := encodeItem(id, it)
		if err != nil {
			return err
		}
		evID := ""
		if it.Event != nil {
			evID = eventID(it.Event.Seq)
		}
		return frame(evID, name, data)
	}, flush, func() error {
		arm()
		_, err := bw.WriteString(": ping\n\n")
		return err
	})
	if data := s.endFrame(id, end); data != nil {
		if frame("", "error", data) == nil {
			_ = flush()
		}
	}
}
