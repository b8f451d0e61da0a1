package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// The real-OpenCode tests run the OpenCode server that npm ci installs in
// testdata/opencode (opencode-linux-x64, the build the opencode-ai package
// runs on Linux x64, pinned in its package-lock.json), offline: its model is
// fakeModel, an OpenAI-compatible chat completions endpoint this test
// serves, and its home and XDG directories are fresh. The test command
// installs it and, on Linux x64, sets PARLEY_TEST_OPENCODE=1, which makes a
// missing binary a failure; elsewhere the tests skip, saying how to install it.
var openCodeBin = filepath.Join("testdata", "opencode", "node_modules", "opencode-linux-x64", "bin", "opencode")

// fakeModel is the model OpenCode talks to: POST /v1/chat/completions,
// streamed. What it answers depends on the request's last message:
//
//	a tool's result            "Done." (or, for a question, "Picked: " and the answer)
//	a user's "say WORDS"       WORDS
//	a user's "read PATH"       a call of the read tool on PATH
//	a user's "bash COMMAND"    a call of the bash tool running COMMAND
//	a user's "ask"             a call of the question tool
//	a user's "ask two"         a call of the question tool with two questions
//	a user's "slow"            words, one every 20 ms, until the request ends
//
// and a title request (OpenCode names its sessions) gets "A title".
type fakeModel struct {
	url string
	// slowStarted gets a value once a slow answer has sent its first
	// words; slowEnded once its request has ended (OpenCode stopped it).
	slowStarted, slowEnded chan struct{}

	mu    sync.Mutex
	calls int
}

func newFakeModel(t *testing.T) *fakeModel {
	t.Helper()
	m := &fakeModel{slowStarted: make(chan struct{}, 4), slowEnded: make(chan struct{}, 4)}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	return m
}

// chatMessage is a message of a chat completions request.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a message's content as text (a string, or the text of its parts).
func (cm chatMessage) text() string {
	var s string
	if json.Unmarshal(cm.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(cm.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"not a chat completion"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	s := &chatStream{w: w, id: fmt.Sprintf("chatcmpl-%d", n)}
	last := req.Messages[len(req.Messages)-1]
	text := strings.TrimSpace(last.text())
	switch {
	case strings.Contains(req.Messages[0].text(), "title generator"):
		s.text("A title")
	case last.Role == "tool" && strings.Contains(text, "answered"):
		s.text("Picked: " + text)
	case last.Role == "tool":
		s.text("Done.")
	case strings.HasPrefix(text, "say "):
		words := strings.TrimPrefix(text, "say ")
		half := len(words) / 2
		s.text(words[:half], words[half:])
	case strings.HasPrefix(text, "read "):
		s.call("read", map[string]any{"filePath": strings.TrimPrefix(text, "read ")})
	case strings.HasPrefix(text, "bash "):
		s.call("bash", map[string]any{"command": strings.TrimPrefix(text, "bash "), "description": "Runs the command"})
	case text == "ask":
		s.call("question", map[string]any{"questions": []map[string]any{{
			"question": "Which color?", "header": "Color",
			"options": []map[string]string{{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}},
		}}})
	case text == "ask two":
		s.call("question", map[string]any{"questions": []map[string]any{
			{"question": "Which color?", "header": "Color", "options": []map[string]string{{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}}},
			{"question": "Which sizes?", "header": "Sizes", "multiple": true,
				"options": []map[string]string{{"label": "S", "description": "small"}, {"label": "M", "description": "medium"}, {"label": "L", "description": "large"}}},
		}})
	case text == "slow":
		s.chunk(map[string]any{"role": "assistant", "content": "Working "}, nil)
		m.slowStarted <- struct{}{}
		for {
			select {
			case <-r.Context().Done():
				m.slowEnded <- struct{}{}
				return
			case <-time.After(20 * time.Millisecond):
				s.chunk(map[string]any{"content": "and working "}, nil)
			}
		}
	default:
		s.text("I do not know what " + text + " means.")
	}
}

// chatStream writes a streamed chat completion.
type chatStream struct {
	w  http.ResponseWriter
	id string
}

func (s *chatStream) chunk(delta map[string]any, finish any) {
	b, _ := json.Marshal(map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
		"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.w.(http.Flusher).Flush()
}

func (s *chatStream) end(finish string) {
	s.chunk(map[string]any{}, finish)
	b, _ := json.Marshal(map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
		"choices": []any{}, "usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	fmt.Fprintf(s.w, "data: %s\n\ndata: [DONE]\n\n", b)
	s.w.(http.Flusher).Flush()
}

func (s *chatStream) text(pieces ...string) {
	for i, p := range pieces {
		d := map[string]any{"content": p}
		if i == 0 {
			d["role"] = "assistant"
		}
		s.chunk(d, nil)
	}
	s.end("stop")
}

func (s *chatStream) call(tool string, args any) {
	a, _ := json.Marshal(args)
	s.chunk(map[string]any{"role": "assistant", "tool_calls": []map[string]any{{"index": 0, "id": "call_" + s.id, "type": "function",
		"function": map[string]string{"name": tool, "arguments": string(a)}}}}, nil)
	s.end("tool_calls")
}

// realOpenCode starts `opencode serve` in a new project directory holding
// go.mod, with fakeModel as its only model and permission as its
// permission settings (nil: OpenCode's), and returns its URL and the
// project directory. It is stopped when the test ends.
func realOpenCode(t *testing.T, model *fakeModel, permission map[string]any) (url, project string) {
	t.Helper()
	bin, err := filepath.Abs(openCodeBin)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("PARLEY_TEST_OPENCODE") == "1" {
			t.Fatalf("OpenCode is not installed (%v): run npm ci in client/testdata/opencode", err)
		}
		t.Skip("OpenCode is not installed: run `npm ci` in client/testdata/opencode (scripts/test does)")
	}
	home, project := t.TempDir(), t.TempDir()
	config := map[string]any{
		"$schema": "https://opencode.ai/config.json", "model": "fake/fake-model", "small_model": "fake/fake-model",
		"autoupdate": false, "share": "disabled",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": model.url + "/v1", "apiKey": "none"},
			"models":  map[string]any{"fake-model": map[string]any{"name": "Fake model"}},
		}},
	}
	if permission != nil {
		config["permission"] = permission
	}
	b, _ := json.MarshalIndent(config, "", "  ")
	for name, content := range map[string]string{"opencode.json": string(b), "go.mod": "module example.com/app\n\ngo 1.26\n"} {
		if err := os.WriteFile(filepath.Join(project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// OpenCode's --port 0 means its default port: pick a free one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "serve", "--hostname", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Dir = project
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		// No network: the plugin package OpenCode installs in its config
		// directory at start (for plugins of the user's, of which there are
		// none) fails to install, and OpenCode goes on without it.
		"npm_config_registry=http://127.0.0.1:9/", "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost",
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("OpenCode's stderr:\n%s", logs.String())
		}
	})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "opencode server listening on "); ok {
				listening <- strings.TrimSpace(u)
				break
			}
		}
		close(listening)
		io.Copy(io.Discard, out)
	}()
	select {
	case url, ok := <-listening:
		if !ok {
			t.Fatalf("OpenCode ended before it listened")
		}
		return url, project
	case <-time.After(60 * time.Second):
		t.Fatal("OpenCode did not listen within a minute")
	}
	return "", ""
}

// bridge connects a runner of a new conversation to OpenCode with
// ServeOpenCode and returns the conversation, a stream of its events from
// the start, and a function that stops serving.
func bridge(t *testing.T, c *client.Client, ctx context.Context, o client.OpenCodeOptions) (id string, st *client.Stream) {
	t.Helper()
	v, err := c.CreateConversation(ctx, client.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	id = v.Conversation.ID
	st = c.Subscribe(ctx, id, client.SubscribeOptions{From: &parley.Position{Seq: 0, Epoch: v.Conversation.Epoch}})
	t.Cleanup(st.Close)
	r, err := c.ConnectRunner(ctx, id, "opencode")
	if err != nil {
		t.Fatal(err)
	}
	serving, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- client.ServeOpenCode(serving, r, o) }()
	t.Cleanup(func() {
		cancel()
		<-done
		r.Close()
	})
	return id, st
}

// untilPrompts reads the stream until n prompts have ended, and returns
// how they ended.
func untilPrompts(t *testing.T, ctx context.Context, st *client.Stream, n int) []string {
	t.Helper()
	var ends []string
	for len(ends) < n {
		fr, err := st.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", ends, err)
		}
		if fr.Event != nil && (fr.Event.Type == "prompt.completed" || fr.Event.Type == "prompt.canceled") {
			ends = append(ends, fr.Event.Type)
		}
	}
	return ends
}

// TestRealOpenCode runs the bridge against the real OpenCode server.
func TestRealOpenCode(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t)
	url, project := realOpenCode(t, model, map[string]any{"bash": "ask"})
	c, ctx := server(t)

	// A burst of prompts queued at once: OpenCode answers each in turn,
	// sending the earlier prompts' messages again as it goes; each prompt
	// gets exactly its own answer, a tool call among them.
	t.Run("QueuedPrompts", func(t *testing.T) {
		id, st := bridge(t, c, ctx, client.OpenCodeOptions{URL: url})
		prompts := []string{"say one fish", "say two fish", "read " + filepath.Join(project, "go.mod"), "say red fish", "say blue fish", "say the end"}
		for _, p := range prompts {
			if _, err := c.Ask(ctx, id, "human", p, ""); err != nil {
				t.Fatal(err)
			}
		}
		ends := untilPrompts(t, ctx, st, len(prompts))
		want := []string{
			"complete | text=one fish | finish(end_turn)",
			"complete | text=two fish | finish(end_turn)",
			"", // the read, checked below
			"complete | text=red fish | finish(end_turn)",
			"complete | text=blue fish | finish(end_turn)",
			"complete | text=the end | finish(end_turn)",
		}
		run := conversationRun(ctx, t, c, id)
		if strings.Join(ends, " ") != strings.TrimSpace(strings.Repeat("prompt.completed ", 6)) || len(run.answers) != len(want) {
			for _, m := range run.answers {
				t.Logf("answer: %s", shape(m))
			}
			t.Fatalf("prompts ended %v with %d answers, want 6 completed with one answer each", ends, len(run.answers))
		}
		for i, m := range run.answers {
			got := shape(m)
			if i == 2 {
				if !strings.HasPrefix(got, "complete | tool(read completed)=") || !strings.Contains(got, "module example.com/app") || !strings.HasSuffix(got, "| text=Done. | finish(end_turn)") {
					t.Errorf("answer 2 is %s, want the read of go.mod, then Done.", got)
				}
				continue
			}
			if got != want[i] {
				t.Errorf("answer %d:\n got %s\nwant %s", i, got, want[i])
			}
		}
	})

	// A stop mid-answer: OpenCode is asked to stop, and does (it ends the
	// model's request); the answer ends canceled with what it had said.
	t.Run("Stop", func(t *testing.T) {
		id, st := bridge(t, c, ctx, client.OpenCodeOptions{URL: url})
		if _, err := c.Ask(ctx, id, "human", "slow", ""); err != nil {
			t.Fatal(err)
		}
		select {
		case <-model.slowStarted:
		case <-ctx.Done():
			t.Fatal("the slow answer never started")
		}
		// Once Parley has some of the answer, stop it.
		for {
			fr, err := st.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if fr.Event != nil && fr.Event.Type == parley.EventChunk {
				break
			}
		}
		if err := c.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		select {
		case <-model.slowEnded:
		case <-ctx.Done():
			t.Fatal("OpenCode did not stop the model's answer")
		}
		if ends := untilPrompts(t, ctx, st, 1); ends[0] != "prompt.canceled" {
			t.Fatalf("the prompt ended %v, want prompt.canceled", ends)
		}
		run := conversationRun(ctx, t, c, id)
		if len(run.answers) != 1 || run.answers[0].Status != parley.StatusCanceled || !strings.HasPrefix(run.answers[0].Content, "Working ") {
			for _, m := range run.answers {
				t.Logf("answer: %s", shape(m))
			}
			t.Fatalf("want one answer, canceled, with what was said")
		}
	})
	// What OpenCode asks becomes an input request in the answer's message;
	// answered over HTTP, the answer goes back to OpenCode, which goes on.
	t.Run("PermissionsAndQuestions", func(t *testing.T) {
		id, st := bridge(t, c, ctx, client.OpenCodeOptions{URL: url})
		if _, err := c.Ask(ctx, id, "human", "bash echo approved", ""); err != nil {
			t.Fatal(err)
		}
		in := awaitInput(t, ctx, c, st, id)
		if in.Kind != "approval" || in.ToolName != "bash" || in.ToolCallID == "" || !strings.Contains(in.Title, "echo approved") || !strings.Contains(string(in.Args), "echo approved") {
			t.Fatalf("the request is %+v, want an approval of bash running echo approved", in)
		}
		if _, err := c.AnswerInput(ctx, id, in.RequestID, "human", parley.Approval{Approved: true}); err != nil {
			t.Fatal(err)
		}
		untilPrompts(t, ctx, st, 1)

		if _, err := c.Ask(ctx, id, "human", "bash echo denied", ""); err != nil {
			t.Fatal(err)
		}
		in = awaitInput(t, ctx, c, st, id)
		if _, err := c.AnswerInput(ctx, id, in.RequestID, "human", parley.Approval{Approved: false, Reason: "not now"}); err != nil {
			t.Fatal(err)
		}
		untilPrompts(t, ctx, st, 1)

		if _, err := c.Ask(ctx, id, "human", "ask", ""); err != nil {
			t.Fatal(err)
		}
		in = awaitInput(t, ctx, c, st, id)
		if in.Kind != "question" || in.Title != "Which color?" || len(in.Options) != 2 || in.Options[1].Label != "Blue" {
			t.Fatalf("the request is %+v, want the question with its options", in)
		}
		if _, err := c.AnswerInput(ctx, id, in.RequestID, "human", map[string]any{"choices": []string{"Blue"}}); err != nil {
			t.Fatal(err)
		}
		untilPrompts(t, ctx, st, 1)

		// Two questions in one call: asked one after the other, answered
		// together.
		if _, err := c.Ask(ctx, id, "human", "ask two", ""); err != nil {
			t.Fatal(err)
		}
		in = awaitInput(t, ctx, c, st, id)
		if in.Title != "Which color?" || in.Multiple {
			t.Fatalf("the first request is %+v, want the first question", in)
		}
		if _, err := c.AnswerInput(ctx, id, in.RequestID, "human", map[string]any{"choices": []string{"Red"}}); err != nil {
			t.Fatal(err)
		}
		in = awaitInput(t, ctx, c, st, id)
		if in.Title != "Which sizes?" || !in.Multiple || len(in.Options) != 3 || in.Detail != "Sizes" {
			t.Fatalf("the second request is %+v, want the second question, several choices allowed", in)
		}
		if _, err := c.AnswerInput(ctx, id, in.RequestID, "human", map[string]any{"choices": []string{"S", "L"}}); err != nil {
			t.Fatal(err)
		}
		untilPrompts(t, ctx, st, 1)

		run := conversationRun(ctx, t, c, id)
		if n := len(run.answers); n != 4 {
			t.Fatalf("%d answers, want 4", n)
		}
		if last := run.answers[3].Content; !strings.Contains(last, `"Which color?"="Red"`) || !strings.Contains(last, `"Which sizes?"="S, L"`) {
			t.Errorf("the last answer is %q, want both answers", last)
		}
		run.answers = run.answers[:3]
		var shapes []string
		for _, m := range run.answers {
			shapes = append(shapes, shape(m))
		}
		if len(shapes) != 3 || !strings.Contains(shapes[0], `tool(bash completed)`) || !strings.Contains(shapes[0], `approved\n`) ||
			!strings.Contains(shapes[1], `tool(bash error)`) || !strings.Contains(shapes[1], "not now") ||
			!strings.Contains(shapes[2], `text=Picked: `) || !strings.Contains(shapes[2], `"Which color?"="Blue"`) {
			t.Fatalf("the answers are\n%s\nwant bash run, bash refused (saying why), and Blue picked", strings.Join(shapes, "\n"))
		}
		// Each message keeps its request, answered by the human.
		for i, m := range run.answers {
			asked := 0
			for _, p := range m.Parts {
				if p.Type == parley.PartInputRequest {
					asked++
					if p.Status != parley.InputStatusAnswered || p.AnsweredBy != "human" || p.ToolCallID == "" {
						t.Errorf("answer %d holds request %+v, want it answered by human, naming its tool call", i, p)
					}
				}
			}
			if asked != 1 || m.AwaitingInput {
				t.Errorf("answer %d holds %d requests (awaiting input: %v), want one answered", i, asked, m.AwaitingInput)
			}
		}
	})
}

// TestRealOpenCodePermissionAnsweredThere: a permission answered in
// OpenCode itself (its own UI, here its HTTP API) is withdrawn in Parley,
// where nobody may answer it any more, and OpenCode goes on.
func TestRealOpenCodePermissionAnsweredThere(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t)
	url, _ := realOpenCode(t, model, map[string]any{"bash": "ask"})
	c, ctx := server(t)
	id, st := bridge(t, c, ctx, client.OpenCodeOptions{URL: url})
	if _, err := c.Ask(ctx, id, "human", "bash echo there", ""); err != nil {
		t.Fatal(err)
	}
	in := awaitInput(t, ctx, c, st, id)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/permission/"+in.RequestID+"/reply", strings.NewReader(`{"reply":"once"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("OpenCode answered the reply %d", res.StatusCode)
	}
	if ends := untilPrompts(t, ctx, st, 1); ends[0] != "prompt.completed" {
		t.Fatalf("the prompt ended %s", ends[0])
	}
	run := conversationRun(ctx, t, c, id)
	if len(run.answers) != 1 || !strings.Contains(shape(run.answers[0]), "tool(bash completed)") {
		t.Fatalf("the answer is %v, want bash run", run.answers)
	}
	var p parley.Part
	for _, q := range run.answers[0].Parts {
		if q.Type == parley.PartInputRequest {
			p = q
		}
	}
	if p.Status != parley.InputStatusCanceled || p.Reason != "answered in OpenCode" {
		t.Fatalf("the Parley request is %+v, want it withdrawn", p)
	}
	if _, err := c.AnswerInput(ctx, id, in.RequestID, "human", parley.Approval{Approved: false}); err == nil {
		t.Fatal("a request answered in OpenCode took an answer in Parley")
	}
}

// awaitInput reads the stream until an input request opens in the
// conversation, and returns it as Inputs lists it.
func awaitInput(t *testing.T, ctx context.Context, c *client.Client, st *client.Stream, id string) parley.Input {
	t.Helper()
	for {
		fr, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fr.Event == nil || fr.Event.Type != parley.EventPartUpdated || !strings.Contains(string(fr.Event.Data), `"input-request"`) {
			continue
		}
		ins, err := c.Inputs(ctx, id, "pending")
		if err != nil {
			t.Fatal(err)
		}
		if len(ins) > 0 {
			return ins[0]
		}
	}
}
