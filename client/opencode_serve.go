package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/parleyhq/parley/internal/sse"
)

// OpenCodeOptions say which OpenCode server and session ServeOpenCode
// connects to a runner.
type OpenCodeOptions struct {
	// URL is the OpenCode server's address, as `opencode serve` prints it
	// (such as http://127.0.0.1:4096).
	URL string
	// SessionID is the OpenCode session that answers the prompts. Empty: a
	// new session is created.
	SessionID string
	// Directory, if set, is the project directory OpenCode works in (sent
	// as its directory query parameter); empty: the server's own.
	Directory string
	// Agent, if set, is the OpenCode agent that answers (such as "build"
	// or "plan"); empty: OpenCode's default.
	Agent string
	// Model, if set, is the model that answers, as "provider/model" (such
	// as "anthropic/claude-sonnet-4-5"); empty: OpenCode's default.
	Model string
	// HTTPClient makes the requests (nil: http.DefaultClient). It must not
	// time out the event stream, which stays open.
	HTTPClient *http.Client
}

// ServeOpenCode answers the runner's prompts with an OpenCode session until
// ctx ends, the runner's connection closes or OpenCode's event stream ends;
// it returns why. It follows the session's events (GET /event), sends each
// prompt the runner is given to the session (POST
// /session/{id}/prompt_async), relays the answer as the runner's frames
// with an OpenCodeAdapter (each prompt is sent with a message id of its
// own, and only the assistant messages whose parent it is are its answer),
// relays what the session asks while it answers (permission.asked,
// question.asked) as Parley input requests in the answer's message and
// sends their outcome back (POST /permission/{id}/reply, POST
// /question/{id}/reply or /reject), and when Parley aborts the answer (a stop or a
// steer) asks OpenCode to stop (POST /session/{id}/abort): the answer then
// ends canceled with what OpenCode said until then. A prompt OpenCode
// refuses ends with an error message. Close the runner once it returns: a
// prompt it was given and did not finish then goes back to the queue.
func ServeOpenCode(ctx context.Context, r *Runner, o OpenCodeOptions) error {
	serving, cancel := context.WithCancel(ctx)
	defer cancel()
	err := serveOpenCode(serving, r, o)
	if ctx.Err() != nil {
		return ctx.Err() // whatever broke first, ctx is why
	}
	return err
}

func serveOpenCode(ctx context.Context, r *Runner, o OpenCodeOptions) error {
	oc := &openCode{base: strings.TrimRight(o.URL, "/"), o: o, hc: o.HTTPClient}
	if oc.hc == nil {
		oc.hc = http.DefaultClient
	}
	session := o.SessionID
	if session == "" {
		var s struct {
			ID string `json:"id"`
		}
		if err := oc.post(ctx, "/session", map[string]any{}, &s); err != nil {
			return fmt.Errorf("creating an OpenCode session: %w", err)
		}
		if session = s.ID; session == "" {
			return errors.New("creating an OpenCode session: the answer names no session")
		}
	}
	events, streamErr, err := oc.subscribe(ctx)
	if err != nil {
		return err
	}
	pushes, nextErr := make(chan Push), make(chan error, 1)
	go func() {
		for {
			p, err := r.Next(ctx)
			if err != nil {
				nextErr <- err
				return
			}
			select {
			case pushes <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	a := &OpenCodeAdapter{Runner: r, SessionID: session}
	prompt := "" // the prompt being answered
	latest := "" // the greatest message id the session's events have named
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return <-streamErr
			}
			if m := ev.Properties.Info; m != nil && m.SessionID == session && m.ID > latest {
				latest = m.ID
			}
			if ev.replied != "" {
				if ev.Properties.SessionID == session {
					go oc.withdraw(ctx, r, ev.replied)
				}
				continue
			}
			if ev.ask != nil {
				if ev.ask.SessionID == session && a.answering() {
					if err := oc.relayInput(ctx, a, ev.Type, *ev.ask); err != nil {
						return err
					}
				}
				continue
			}
			if err := a.Handle(ctx, ev); err != nil {
				return err
			}
		case err := <-nextErr:
			return err
		case p := <-pushes:
			switch {
			case p.Type == "prompt":
				// The prompt's user message gets an id of our choosing, later
				// than the session's: its answers name it as their parent.
				prompt = p.PromptID
				messageID := newOpenCodeID("msg", latest)
				a.PromptedAs(messageID)
				if err := oc.prompt(ctx, session, messageID, p.Content); err != nil {
					if ctx.Err() != nil {
						return err
					}
					if err := a.fail(ctx, "OpenCode did not take the prompt: "+err.Error()); err != nil {
						return err
					}
				}
			case p.Type == "input.answered":
				// No relay waits for it any more (its answer ended): ack it.
				go r.AckInput(ctx, p.Answered.RequestID)
			case p.Type == "abort" && p.PromptID == prompt && a.answering():
				if err := oc.post(ctx, "/session/"+url.PathEscape(session)+"/abort", nil, nil); err != nil {
					if ctx.Err() != nil {
						return err
					}
					if err := a.Abort(ctx); err != nil { // OpenCode cannot be told: end it here
						return err
					}
					continue
				}
				a.stop()
			}
			// An abort of an answer that has ended needs nothing (its end
			// was sent), and a revert is Parley's own.
		}
	}
}

// openCode makes the HTTP requests to an OpenCode server.
type openCode struct {
	base string
	o    OpenCodeOptions
	hc   *http.Client
	// asking maps what OpenCode asks (a permission's or question's id) to
	// the Parley request asked for it now, so that one answered in
	// OpenCode's own UI is withdrawn in Parley.
	asking sync.Map
}

// url is the address of path, with the directory if one is set.
func (oc *openCode) url(path string) string {
	if oc.o.Directory == "" {
		return oc.base + path
	}
	return oc.base + path + "?directory=" + url.QueryEscape(oc.o.Directory)
}

// prompt sends one prompt to the session as the user message messageID;
// OpenCode answers it in the session's events.
func (oc *openCode) prompt(ctx context.Context, session, messageID, content string) error {
	body := map[string]any{"messageID": messageID, "parts": []map[string]string{{"type": "text", "text": content}}}
	if oc.o.Agent != "" {
		body["agent"] = oc.o.Agent
	}
	if provider, model, ok := strings.Cut(oc.o.Model, "/"); ok {
		body["model"] = map[string]string{"providerID": provider, "modelID": model}
	}
	return oc.post(ctx, "/session/"+url.PathEscape(session)+"/prompt_async", body, nil)
}

// post sends a JSON body (nil: none) and decodes the answer into out (nil:
// it is dropped).
func (oc *openCode) post(ctx context.Context, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, oc.url(path), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := oc.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// maxOpenCodeEvent bounds one event of OpenCode's stream (a part carries a
// tool's whole output).
const maxOpenCodeEvent = 32 << 20

// subscribe opens the event stream and returns once its first event (the
// server's server.connected) has come, so that no event after it is
// missed. The channel yields the events the adapter follows; when it
// closes, streamErr says why.
func (oc *openCode) subscribe(ctx context.Context) (<-chan OpenCodeEvent, <-chan error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, oc.url("/event"), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := oc.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("GET /event: %s", resp.Status)
	}
	stream := sse.NewReader(resp.Body, maxOpenCodeEvent)
	if _, err := readSSE(stream); err != nil {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("OpenCode's event stream: %w", err)
	}
	events, streamErr := make(chan OpenCodeEvent), make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		defer close(events)
		for {
			data, err := readSSE(stream)
			if err != nil {
				streamErr <- fmt.Errorf("OpenCode's event stream: %w", err)
				return
			}
			ev, ok, err := decodeOpenCodeEvent(data)
			if err != nil {
				streamErr <- err
				return
			}
			if !ok {
				continue
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				streamErr <- ctx.Err()
				return
			}
		}
	}()
	return events, streamErr, nil
}

// followed are the event types the adapter reads.
var followed = map[string]bool{"message.updated": true, "message.part.updated": true, "message.part.delta": true,
	"session.status": true, "session.idle": true, "session.error": true}

// decodeOpenCodeEvent decodes one event's data; ok is false for the types
// the adapter does not read, which are left undecoded.
func decodeOpenCodeEvent(data []byte) (ev OpenCodeEvent, ok bool, err error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil || !followed[head.Type] && !asks[head.Type] && !replies[head.Type] {
		return ev, false, nil
	}
	if replies[head.Type] {
		var r struct {
			Properties struct {
				SessionID string `json:"sessionID"`
				RequestID string `json:"requestID"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return ev, false, fmt.Errorf("OpenCode event %s: %w", head.Type, err)
		}
		ev.Type, ev.Properties.SessionID, ev.replied = head.Type, r.Properties.SessionID, r.Properties.RequestID
		return ev, r.Properties.RequestID != "", nil
	}
	if asks[head.Type] {
		typ, ask, err := decodeOpenCodeAsk(data)
		if err != nil {
			return ev, false, err
		}
		ev.Type, ev.Properties.SessionID, ev.ask = typ, ask.SessionID, &ask
		return ev, true, nil
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, false, fmt.Errorf("OpenCode event %s: %w", head.Type, err)
	}
	return ev, true, nil
}

// readSSE returns the data of the next event of OpenCode's stream; the
// stream has no end OpenCode means, so any end is io.ErrUnexpectedEOF.
func readSSE(events *sse.Reader) ([]byte, error) {
	ev, err := events.Next()
	switch {
	case errors.Is(err, io.EOF):
		return nil, io.ErrUnexpectedEOF
	case errors.Is(err, sse.ErrTooLarge):
		return nil, errors.New("an event is over the size limit")
	}
	return ev.Data, err
}
