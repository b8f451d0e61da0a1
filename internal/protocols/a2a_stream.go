package protocols

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/a2a"
)

// SendStreamingMessage and SubscribeToTask (0.3: message/stream,
// tasks/resubscribe): SSE, each event `data: {"jsonrpc":"2.0","id":…,
// "result":<StreamResponse>}` (0.3: the event's own object). Every event
// made of the log carries Parley's position as its SSE id, "<epoch>:<seq>"
// for the last event made of the log's event seq (and "<epoch>:<seq>:<k>"
// for the k-th before it), and again in its metadata (parley.position). A
// subscribe that names a position (the Last-Event-ID header, or
// params.metadata.parley.after) gets exactly the events after it, even of
// a task that ended meanwhile; one that names none gets the task as it
// stands (the Task, its id the position it stands at), then what follows.
// A stream ends when the task ends, or waits for input still pending
// (input-required: answer it with a message naming the task, or with POST
// /v1/conversations/{id}/inputs/{requestId}, then subscribe again).

// a2aStream writes one call's stream.
type a2aStream struct {
	c      *a2aCall
	out    *sseOut
	epoch  string
	resume *aguiPosition // write only the events after it (nil: all)
}

// write writes the events made of log event seq, past the resume position.
func (st *a2aStream) write(evs []a2a.StreamResponse, seq int64) error {
	for k := range evs {
		if r := st.resume; r != nil && (seq < r.seq || seq == r.seq && (r.frames < 0 || k <= r.frames)) {
			continue
		}
		id := st.epoch + ":" + strconv.FormatInt(seq, 10)
		if k < len(evs)-1 {
			id += ":" + strconv.Itoa(k)
		}
		ev := &evs[k]
		meta := map[string]any{"parley": map[string]any{"position": id}}
		switch {
		case ev.Task != nil:
			ev.Task.Metadata = meta
		case ev.StatusUpdate != nil:
			ev.StatusUpdate.Metadata = meta
		case ev.ArtifactUpdate != nil:
			ev.ArtifactUpdate.Metadata = meta
		}
		res, err := st.c.result(ev)
		if err != nil {
			return err
		}
		if err := st.out.data(id, rpcEnvelope(st.c.id, res, nil)); err != nil {
			return err
		}
	}
	return nil
}

// a2aSendStream serves SendStreamingMessage: the task (submitted), then its
// events as its answer comes.
func (s *Server) a2aSendStream(w http.ResponseWriter, r *http.Request, c *a2aCall) {
	ctx, done, req, ref, text, ok := s.a2aStart(w, r, c)
	if !ok {
		return
	}
	defer done()
	if req.Message.TaskID != "" {
		// Input answered: the task as it stands, then what follows.
		s.a2aLive(ctx, w, c, ref, false)
		return
	}
	s.a2aReplay(ctx, w, c, ref, text, nil)
}

// a2aSubscribe serves SubscribeToTask.
func (s *Server) a2aSubscribe(w http.ResponseWriter, r *http.Request, c *a2aCall) {
	var req struct {
		ID       string `json:"id"`
		Metadata struct {
			Parley struct {
				After string `json:"after"`
			} `json:"parley"`
		} `json:"metadata"`
	}
	if e := c.decode(&req); e != nil {
		writeRPC(w, c.id, nil, e)
		return
	}
	resume, err := aguiLastEventID(r)
	if err == nil && resume == nil && req.Metadata.Parley.After != "" {
		h := http.Header{}
		h.Set("Last-Event-ID", req.Metadata.Parley.After)
		resume, err = aguiLastEventID(&http.Request{Header: h})
	}
	if err != nil {
		writeRPC(w, c.id, nil, &a2a.Error{Code: a2a.CodeInvalidParams, Message: parley.ErrorMessage(err), Data: map[string]string{"code": parley.EINVALID, "message": parley.ErrorMessage(err)}})
		return
	}
	ref, err := s.findTask(r.Context(), c.who, c.agent, req.ID)
	if err != nil {
		s.reply(w, c, nil, err)
		return
	}
	ctx, done, ok := s.host.ConnectStream(w, r, c.who)
	if !ok {
		return
	}
	defer done()
	if resume != nil && resume.epoch == ref.from.Epoch {
		s.a2aReplay(ctx, w, c, ref, "", resume)
		return
	}
	s.a2aLive(ctx, w, c, ref, true)
}

// a2aReplay streams task ref from its start: the Task (submitted) at the
// position its prompt was queued at, then every event of its answer; with
// resume, only those after it.
func (s *Server) a2aReplay(ctx context.Context, w http.ResponseWriter, c *a2aCall, ref *a2aTaskRef, text string, resume *aguiPosition) {
	a := newAnswer(ref.prompt)
	if text == "" {
		if m, err := s.rd.Message(ctx, ref.conv, ref.prompt); err == nil {
			text = m.Content
		}
	}
	e := newA2AEnc(ref, text)
	st := &a2aStream{c: c, out: s.startSSE(w), epoch: ref.from.Epoch, resume: resume}
	defer st.out.done()
	if st.write([]a2a.StreamResponse{{Task: e.snapshot(nil)}}, ref.from.Seq) != nil {
		return
	}
	s.a2aFollow(ctx, st, ref, a, e, ref.from.Seq)
}

// a2aLive streams task ref as it stands (the Task, at the position of the
// last event folded), then what follows. With terminal (a subscribe), a task
// that ended is UnsupportedOperation, as A2A says.
func (s *Server) a2aLive(ctx context.Context, w http.ResponseWriter, c *a2aCall, ref *a2aTaskRef, terminal bool) {
	a, e, seq, err := s.foldTask(ctx, ref, c.agent, "")
	if err == nil && terminal && a.ended() {
		err = &a2a.Error{Code: a2a.CodeUnsupportedOperation, Message: "task " + ref.id + " has ended (" + string(e.task.Status.State) + "): read it with GetTask, or resubscribe from a position (Last-Event-ID) to get the events after it",
			Data: map[string]string{"code": parley.EINVALIDVALUE, "message": "the task has ended"}}
	}
	if err != nil {
		s.reply(w, c, nil, err)
		return
	}
	st := &a2aStream{c: c, out: s.startSSE(w), epoch: ref.from.Epoch}
	defer st.out.done()
	if st.write([]a2a.StreamResponse{{Task: e.snapshot(nil)}}, seq) != nil {
		return
	}
	if a.ended() {
		_ = st.out.flush()
		return
	}
	if paused, err := s.a2aPaused(ctx, ref, a, e); err != nil || paused {
		_ = st.out.flush()
		return
	}
	s.a2aFollow(ctx, st, ref, a, e, seq)
}

// a2aFollow writes the events of task ref's answer a after seq, until it
// ends or waits for input still pending; an end the server makes (the
// token revoked, the conversation deleted, a shutdown) is a JSON-RPC error
// event.
func (s *Server) a2aFollow(ctx context.Context, st *a2aStream, ref *a2aTaskRef, a *answerState, e *a2aEnc, seq int64) {
	end := s.followAnswer(ctx, ref.conv, parley.Position{Seq: seq, Epoch: ref.from.Epoch}, a, st.out, func(steps []step, seq int64) error {
		if r := st.resume; r != nil && a.tombstone != 0 && a.tombstone <= r.seq {
			// Retention compacted deltas of the answer before the position:
			// the events made of them now are not those the client was
			// sent, so its place among them is lost. Nothing was written
			// yet (every event so far was at or before the position).
			return errRestartRun
		}
		if err := st.write(e.events(steps, a), seq); err != nil {
			return err
		}
		if paused, err := s.a2aPaused(ctx, ref, a, e); err != nil || paused {
			return errPaused
		}
		return nil
	})
	if errors.Is(end, errRestartRun) {
		// The task as it stands instead (a Task event replaces what the
		// client holds of it), then what follows.
		st.resume = nil
		a, e, seq, err := s.foldTask(ctx, ref, st.c.agent, "")
		if err != nil || st.write([]a2a.StreamResponse{{Task: e.snapshot(nil)}}, seq) != nil || st.out.flush() != nil || a.ended() {
			return
		}
		if paused, err := s.a2aPaused(ctx, ref, a, e); err == nil && !paused {
			s.a2aFollow(ctx, st, ref, a, e, seq)
		}
		return
	}
	if text, ok := s.endText(ref.conv, end); ok {
		frame := rpcEnvelope(st.c.id, nil, &a2a.Error{Code: -32000, Message: text, Data: map[string]string{"code": parley.ErrorCode(end), "message": text}})
		if st.out.data("", frame) == nil {
			_ = st.out.flush()
		}
	}
}
