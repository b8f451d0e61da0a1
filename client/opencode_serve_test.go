package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// fakeOpenCode is an OpenCode server that plays recorded event streams: the
// n-th prompt sent to its session plays the n-th stream up to where the
// stream marks the abort, and an abort plays the rest. A stream names the
// id its prompt's user message was recorded with (": the prompt is sent
// as msg_…"); when the prompt's body has a messageID, the streams say that
// id instead. A prompt with no stream left is refused. It records every
// request but the event stream (the messageID of a prompt as MSG).
type fakeOpenCode struct {
	url      string
	streams  []string
	feed     chan string // what the event stream sends
	prompted chan struct{}

	mu       sync.Mutex
	requests []string // method, path, query and body
	prompts  int
	ids      []string          // the messageID of each prompt
	renamed  *strings.Replacer // recorded message ids → those sent
	pairs    []string
}

// sentAs is the id a recorded stream's prompt was sent as.
var sentAs = regexp.MustCompile(`(?m)^: the prompt is sent as (msg_[0-9A-Za-z]+)$`)

// messageIDs are the messageIDs of prompt bodies.
var messageIDs = regexp.MustCompile(`"messageID":"[^"]*"`)

func newFakeOpenCode(t *testing.T, files ...string) *fakeOpenCode {
	t.Helper()
	f := &fakeOpenCode{feed: make(chan string, 2*len(files)+1), prompted: make(chan struct{}, len(files)+1), renamed: strings.NewReplacer()}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		f.streams = append(f.streams, string(b))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /event", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, "")
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"evt_0\",\"type\":\"server.connected\",\"properties\":{}}\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case s := <-f.feed:
				io.WriteString(w, s)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /session", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, f.body(r))
		fmt.Fprintf(w, `{"id":%q,"slug":"calm-river","projectID":"global","directory":"/work/app","title":"New session","version":"1.2.0","time":{"created":1760000000000,"updated":1760000000000}}`, openCodeSession)
	})
	mux.HandleFunc("POST /session/{id}/prompt_async", func(w http.ResponseWriter, r *http.Request) {
		body := f.body(r)
		f.record(r, body)
		var prompt struct {
			MessageID string `json:"messageID"`
		}
		_ = json.Unmarshal([]byte(body), &prompt)
		f.mu.Lock()
		n := f.prompts
		f.prompts++
		f.ids = append(f.ids, prompt.MessageID)
		if m := sentAs.FindStringSubmatch(f.stream(n)); m != nil && prompt.MessageID != "" {
			f.pairs = append(f.pairs, m[1], prompt.MessageID)
			f.renamed = strings.NewReplacer(f.pairs...)
		}
		f.mu.Unlock()
		defer func() { f.prompted <- struct{}{} }()
		if r.PathValue("id") != openCodeSession || n >= len(f.streams) {
			http.Error(w, `{"_tag":"BadRequest"}`, http.StatusBadRequest)
			return
		}
		before, _, _ := strings.Cut(f.stream(n), ": the session is aborted here\n")
		f.feed <- f.rename(before)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /session/{id}/abort", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, f.body(r))
		f.mu.Lock()
		n := f.prompts - 1
		f.mu.Unlock()
		if _, after, ok := strings.Cut(f.stream(n), ": the session is aborted here\n"); ok {
			f.feed <- f.rename(after)
		}
		io.WriteString(w, "true")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// stream is the n-th recorded stream ("" past the last).
func (f *fakeOpenCode) stream(n int) string {
	if n < 0 || n >= len(f.streams) {
		return ""
	}
	return f.streams[n]
}

// rename gives the recorded message ids of the prompts sent so far as they were sent.
func (f *fakeOpenCode) rename(s string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renamed.Replace(s)
}

// sentIDs are the messageIDs of the prompts sent so far.
func (f *fakeOpenCode) sentIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids)
}

func (f *fakeOpenCode) body(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func (f *fakeOpenCode) record(r *http.Request, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body = messageIDs.ReplaceAllString(body, `"messageID":"MSG"`)
	f.requests = append(f.requests, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+body))
}

func (f *fakeOpenCode) sent() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.requests, "\n")
}

// serveOpenCode connects a runner of a new conversation to the fake
// OpenCode with ServeOpenCode, and returns the conversation and a function
// that waits until n prompts have ended, stops serving and returns what
// ServeOpenCode returned.
func serveOpenCode(t *testing.T, f *fakeOpenCode, o client.OpenCodeOptions) (c *client.Client, ctx context.Context, id string, stop func(n int) error) {
	t.Helper()
	o.URL = f.url
	return serveBridge(t, "opencode", func(ctx context.Context, r *client.Runner) error { return client.ServeOpenCode(ctx, r, o) })
}

// serveBridge connects a runner of a new conversation, as agent, and
// serves it with serve (a bridge: ServeOpenCode, ServeA2A); it returns the
// conversation and a function that waits until n prompts have ended,
// stops serving and returns what serve returned.
func serveBridge(t *testing.T, agent string, serve func(context.Context, *client.Runner) error) (c *client.Client, ctx context.Context, id string, stop func(n int) error) {
	t.Helper()
	c, ctx = server(t)
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id = v.Conversation.ID
	// From the start: a stream connects at its first Next, which comes
	// after the prompts are sent.
	st := c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0, Epoch: v.Conversation.Epoch}})
	t.Cleanup(st.Close)
	r, err := c.ConnectRunner(ctx, id, agent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	serving, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serve(serving, r) }()
	stop = func(n int) error {
		t.Helper()
		for n > 0 {
			fr, err := st.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if fr.Event != nil && (fr.Event.Type == "prompt.completed" || fr.Event.Type == "prompt.canceled") {
				n--
			}
		}
		cancel()
		return <-done
	}
	return c, ctx, id, stop
}

// TestServeOpenCodeAnswersEachPrompt: a session is created, each prompt is
// sent to it with the agent, model and directory asked for, and its answer
// relayed; the end of the failed first answer, which comes after it ended,
// is not taken for the second; a prompt OpenCode refuses ends with an error.
func TestServeOpenCodeAnswersEachPrompt(t *testing.T) {
	t.Parallel()
	f := newFakeOpenCode(t, "opencode_error.sse", "opencode_tools.sse")
	c, ctx, id, stop := serveOpenCode(t, f, client.OpenCodeOptions{Directory: "/work/app", Agent: "build", Model: "anthropic/claude-sonnet-4-5"})
	for _, p := range []string{"Summarize the README.", "Read go.mod and missing.go.", "And then?"} {
		if _, err := c.Ask(ctx, id, "human", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := stop(3); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeOpenCode returned %v, want context.Canceled", err)
	}
	q := "?directory=%2Fwork%2Fapp "
	prompt := `{"agent":"build","messageID":"MSG","model":{"modelID":"claude-sonnet-4-5","providerID":"anthropic"},"parts":[{"text":%q,"type":"text"}]}`
	want := strings.Join([]string{
		"POST /session" + q + "{}",
		"GET /event" + strings.TrimSpace(q),
		"POST /session/" + openCodeSession + "/prompt_async" + q + fmt.Sprintf(prompt, "Summarize the README."),
		"POST /session/" + openCodeSession + "/prompt_async" + q + fmt.Sprintf(prompt, "Read go.mod and missing.go."),
		"POST /session/" + openCodeSession + "/prompt_async" + q + fmt.Sprintf(prompt, "And then?"),
	}, "\n")
	if got := f.sent(); got != want {
		t.Errorf("OpenCode was sent\n%s\nwant\n%s", got, want)
	}
	refused := "error | error=OpenCode did not take the prompt: POST /session/" + openCodeSession +
		`/prompt_async: 400 Bad Request: {"_tag":"BadRequest"} | finish(error)`
	checkRun(t, conversationRun(ctx, t, c, id), "prompt.completed prompt.completed prompt.completed", errorShape, toolsShape, refused)
	// Each answer is tied to the session that wrote it, the one made here.
	answers := 0
	for m, err := range c.EachMessage(ctx, id, client.ListMessagesOptions{AgentID: "opencode"}) {
		if err != nil {
			t.Fatal(err)
		}
		answers++
		if want := `{"opencodeSessionId":"` + openCodeSession + `"}`; string(m.Metadata) != want {
			t.Errorf("answer %s has metadata %s, want %s", m.ID, m.Metadata, want)
		}
	}
	if answers != 3 {
		t.Errorf("%d answers, want 3", answers)
	}
}

// TestServeOpenCodeStopsOpenCodeOnASteer: a steer aborts the answer under
// way; OpenCode is asked to stop, the answer ends canceled with what
// OpenCode said until it stopped, and the steer is sent next.
func TestServeOpenCodeStopsOpenCodeOnASteer(t *testing.T) {
	t.Parallel()
	f := newFakeOpenCode(t, "opencode_aborted.sse", "opencode_answer.sse")
	c, ctx, id, stop := serveOpenCode(t, f, client.OpenCodeOptions{SessionID: openCodeSession})
	if _, err := c.Ask(ctx, id, "human", "Run the tests.", ""); err != nil {
		t.Fatal(err)
	}
	<-f.prompted // the answer is under way
	if _, err := c.Ask(ctx, id, "human", "Stop. What module does go.mod declare?", "steer"); err != nil {
		t.Fatal(err)
	}
	if err := stop(2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeOpenCode returned %v, want context.Canceled", err)
	}
	want := strings.Join([]string{
		"GET /event",
		"POST /session/" + openCodeSession + `/prompt_async {"messageID":"MSG","parts":[{"text":"Run the tests.","type":"text"}]}`,
		"POST /session/" + openCodeSession + "/abort",
		"POST /session/" + openCodeSession + `/prompt_async {"messageID":"MSG","parts":[{"text":"Stop. What module does go.mod declare?","type":"text"}]}`,
	}, "\n")
	if got := f.sent(); got != want {
		t.Errorf("OpenCode was sent\n%s\nwant\n%s", got, want)
	}
	checkRun(t, conversationRun(ctx, t, c, id), "prompt.canceled prompt.completed", abortedShape, answerShape)
}

// TestServeOpenCodeStopsBeforeOpenCodeStarted: the steer comes when
// OpenCode has recorded the prompt but not started on it; asked to stop,
// it goes idle with no error, and the prompt ends canceled with nothing
// said.
func TestServeOpenCodeStopsBeforeOpenCodeStarted(t *testing.T) {
	t.Parallel()
	f := newFakeOpenCode(t, "opencode_aborted_early.sse", "opencode_answer.sse")
	c, ctx, id, stop := serveOpenCode(t, f, client.OpenCodeOptions{SessionID: openCodeSession})
	if _, err := c.Ask(ctx, id, "human", "Run the tests.", ""); err != nil {
		t.Fatal(err)
	}
	<-f.prompted
	if _, err := c.Ask(ctx, id, "human", "What module does go.mod declare?", "steer"); err != nil {
		t.Fatal(err)
	}
	if err := stop(2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeOpenCode returned %v, want context.Canceled", err)
	}
	if got := f.sent(); strings.Count(got, "/abort") != 1 {
		t.Errorf("OpenCode was sent\n%s\nwant one abort", got)
	}
	checkRun(t, conversationRun(ctx, t, c, id), "prompt.canceled prompt.completed", answerShape)
}

// ExampleServeOpenCode answers a conversation's prompts with the OpenCode
// server that `opencode serve --port 4096` started (it is compiled, not run).
func ExampleServeOpenCode() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:7700", "") // an agent token, or "" on an open server
	r, err := c.ConnectRunner(ctx, "CONVERSATION_ID", "opencode")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	err = client.ServeOpenCode(ctx, r, client.OpenCodeOptions{URL: "http://127.0.0.1:4096"})
	log.Print(err) // ctx ended, the runner's connection closed, or OpenCode's event stream ended
}

// TestServeOpenCodeTiesEachAnswerToItsPrompt plays what OpenCode 1.18
// sent for two prompts, the second sent once the first went idle: before
// recording the second prompt's message, OpenCode sends the first one's
// again. Each prompt goes with a message id of its own, ascending, and
// each answer is taken from the messages that name its prompt's id as
// their parent: the second answer is not lost to the first prompt's
// message sent again.
func TestServeOpenCodeTiesEachAnswerToItsPrompt(t *testing.T) {
	t.Parallel()
	f := newFakeOpenCode(t, "opencode_resent_1.sse", "opencode_resent_2.sse")
	c, ctx, id, stop := serveOpenCode(t, f, client.OpenCodeOptions{SessionID: openCodeSession})
	for _, p := range []string{"What does go.mod declare?", "And which Go version?"} {
		if _, err := c.Ask(ctx, id, "human", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := stop(2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeOpenCode returned %v, want context.Canceled", err)
	}
	ids := f.sentIDs()
	if len(ids) != 2 || !strings.HasPrefix(ids[0], "msg_") || len(ids[0]) != len("msg_")+26 || ids[1] <= ids[0] {
		t.Errorf("the prompts were sent as %q, want two OpenCode message ids, ascending", ids)
	}
	checkRun(t, conversationRun(ctx, t, c, id), "prompt.completed prompt.completed",
		"complete | text=You said: What does go.mod declare? | finish(end_turn)",
		"complete | text=You said: And which Go version? | finish(end_turn)")
}
