package client_test

// The remote A2A agent the bridge's tests talk to, and how they serve it
// and read what the bridge wrote.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/client"
)

// fakeA2A is a remote A2A agent that plays a script: the n-th message sent
// to it (SendMessage or SendStreamingMessage, or their 0.3 names) is
// answered with the n-th turn's events, as a stream or as one result; a
// turn that holds keeps its stream open until the request ends. It
// records every JSON-RPC call.
type fakeA2A struct {
	url       string
	legacy    bool // speaks 0.3: its card and its JSON are 0.3's
	streaming bool
	turns     []a2aTurn
	canceled  chan string // the task ids of the cancels it was sent
	holding   chan struct{}
	// got is the task GetTask answers, one per call (the last again).
	got []string

	mu    sync.Mutex
	calls []a2aCall
	sends int
}

// a2aTurn is the answer to one message: its events (the JSON of each
// result), and whether the stream then stays open until the request ends.
type a2aTurn struct {
	events []string
	hold   bool
	// wait, if set, holds the events back until it is closed (the stream
	// is open meanwhile, and holding is signalled).
	wait chan struct{}
}

// a2aCall is one call the fake was sent.
type a2aCall struct {
	Method  string
	Params  json.RawMessage
	Version string // the A2A-Version header
	Auth    string // the Authorization header
}

func newFakeA2A(t *testing.T, legacy, streaming bool, turns ...a2aTurn) *fakeA2A {
	t.Helper()
	f := &fakeA2A{legacy: legacy, streaming: streaming, turns: turns, canceled: make(chan string, 4), holding: make(chan struct{}, 4)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		f.record(a2aCall{Method: "card", Auth: r.Header.Get("Authorization")})
		w.Header().Set("Content-Type", "application/json")
		if f.legacy {
			fmt.Fprintf(w, `{"protocolVersion":"0.3.0","name":"Old agent","description":"d","url":%q,"preferredTransport":"JSONRPC","version":"1","capabilities":{"streaming":%t},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`, f.url+"/rpc", f.streaming)
			return
		}
		fmt.Fprintf(w, `{"name":"Agent","description":"d","version":"1","supportedInterfaces":[{"url":%q,"protocolBinding":"HTTP+JSON","protocolVersion":"1.0"},{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"0.3"},{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":%t},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`,
			f.url+"/rest", f.url+"/old", f.url+"/rpc", f.streaming)
	})
	mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.record(a2aCall{Method: req.Method, Params: req.Params, Version: r.Header.Get("A2A-Version"), Auth: r.Header.Get("Authorization")})
		respond := func(result string) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
		}
		switch req.Method {
		case "CancelTask", "tasks/cancel":
			var p struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(req.Params, &p)
			f.canceled <- p.ID
			task := fmt.Sprintf(`{"id":%q,"contextId":"c1","status":{"state":"TASK_STATE_CANCELED"}}`, p.ID)
			if f.legacy {
				task = fmt.Sprintf(`{"kind":"task","id":%q,"contextId":"c1","status":{"state":"canceled"}}`, p.ID)
			}
			io.WriteString(w, respond(task))
			return
		case "GetTask", "tasks/get":
			f.mu.Lock()
			task := f.got[0]
			if len(f.got) > 1 {
				f.got = f.got[1:]
			}
			f.mu.Unlock()
			io.WriteString(w, respond(task))
			return
		case "SendMessage", "SendStreamingMessage", "message/send", "message/stream":
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`, req.ID)
			return
		}
		f.mu.Lock()
		n := f.sends
		f.sends++
		f.mu.Unlock()
		if n >= len(f.turns) {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no turn left"}}`, req.ID)
			return
		}
		turn := f.turns[n]
		if !strings.Contains(req.Method, "tream") {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, respond(turn.events[0]))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if turn.wait != nil {
			io.WriteString(w, ": starting\n\n")
			w.(http.Flusher).Flush()
			f.holding <- struct{}{}
			select {
			case <-turn.wait:
			case <-r.Context().Done():
				return
			}
		}
		for _, ev := range turn.events {
			fmt.Fprintf(w, "data: %s\n\n", respond(ev))
			w.(http.Flusher).Flush()
		}
		if turn.hold {
			io.WriteString(w, ": holding\n\n")
			w.(http.Flusher).Flush()
			f.holding <- struct{}{}
			<-r.Context().Done()
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeA2A) record(c a2aCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// sent are the calls of method the fake was sent.
func (f *fakeA2A) sent(method string) []a2aCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []a2aCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// sentMessage is the message of a send call's params.
type sentMessage struct {
	Kind      string `json:"kind"`
	Role      string `json:"role"`
	ContextID string `json:"contextId"`
	TaskID    string `json:"taskId"`
	Parts     []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"parts"`
}

func (c a2aCall) message(t *testing.T) sentMessage {
	t.Helper()
	var p struct {
		Message sentMessage `json:"message"`
	}
	if err := json.Unmarshal(c.Params, &p); err != nil {
		t.Fatalf("%s params %s: %v", c.Method, c.Params, err)
	}
	return p.Message
}

// serveA2A connects a runner of a new conversation, as agent "a2a", to
// the fake with ServeA2A, and returns the conversation and a function
// that waits until n prompts have ended, stops serving and returns what
// ServeA2A returned.
func serveA2A(t *testing.T, f *fakeA2A, o client.A2AOptions) (c *client.Client, ctx context.Context, id string, stop func(n int) error) {
	t.Helper()
	o.URL = f.url
	return serveBridge(t, "a2a", func(ctx context.Context, r *client.Runner) error { return client.ServeA2A(ctx, r, o) })
}

// checkA2ARun checks how the prompts ended and the shape of each message
// of the bridged agent.
func checkA2ARun(ctx context.Context, t *testing.T, c *client.Client, id, ends string, shapes ...string) {
	t.Helper()
	msgs, err := c.AllMessages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		if m.AgentID == "a2a" {
			got = append(got, shape(m))
		}
	}
	evs, _, err := c.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ended []string
	for _, e := range evs {
		if e.Type == "prompt.completed" || e.Type == "prompt.canceled" {
			ended = append(ended, e.Type)
		}
	}
	if g := strings.Join(ended, " "); g != ends {
		t.Errorf("the prompts ended with %q, want %q", g, ends)
	}
	if len(got) != len(shapes) {
		t.Fatalf("messages %q, want %q", got, shapes)
	}
	for i := range got {
		if got[i] != shapes[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, got[i], shapes[i])
		}
	}
}
