package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// TestA2ABridgeFlagsAreDocumented: docs/a2a-bridge.md's table of parley
// a2a-bridge's flags has a row for every flag, with its default, and no
// other.
func TestA2ABridgeFlagsAreDocumented(t *testing.T) {
	for _, env := range []string{"PARLEY_SERVER", "PARLEY_TOKEN", "PARLEY_A2A_TOKEN"} {
		t.Setenv(env, "")
	}
	fs, _ := newA2ABridgeFlags(io.Discard)
	checkFlagsDocumented(t, fs, "../../docs/a2a-bridge.md", "parley a2a-bridge", 3)
}

// TestA2ABridgeAnswers runs parley a2a-bridge against parley serve and an
// A2A agent that answers with a message: a prompt to the bridged agent,
// in any conversation it takes part in, is answered by the remote agent,
// which is sent the prompt with the remote token; a signal ends the
// bridge cleanly.
func TestA2ABridgeAnswers(t *testing.T) {
	t.Setenv("PARLEY_POSTGRES_URL", "")
	_, base, stopServer := startServeMain(t, filepath.Join(t.TempDir(), "parley.db"))
	defer stopServer()
	var mu sync.Mutex
	var got []string
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprintf(w, `{"name":"Echo","supportedInterfaces":[{"url":"http://%s/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{}}`, r.Host)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Message struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"message"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = append(got, req.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		text, _ := json.Marshal("Echo: " + req.Params.Message.Parts[0].Text)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":%s}]}}}`, req.ID, text)
	}))
	defer remote.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(base, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"human", "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	bridging, stopBridge := context.WithCancel(ctx)
	done := make(chan error, 1)
	var stderr strings.Builder
	go func() {
		done <- run(bridging, []string{"a2a-bridge", "-server", base, "-agent", "echo", "-remote", remote.URL, "-remote-token", "rt"}, io.Discard, &stderr)
	}()
	ans, err := c.AskAndWait(ctx, v.Conversation.ID, client.NewPrompt{AgentID: "human", To: "echo", Content: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Message == nil || ans.Message.Content != "Echo: ping" || ans.Message.AgentID != "echo" {
		t.Errorf("the answer is %+v, want echo's \"Echo: ping\"", ans.Message)
	}
	stopBridge()
	if err := <-done; err != nil {
		t.Errorf("a2a-bridge returned %v after its context ended, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "SendMessage Bearer rt" {
		t.Errorf("the remote agent was sent %q, want one SendMessage with the token", got)
	}
	if !strings.Contains(stderr.String(), `echo answers as "Echo"`) {
		t.Errorf("a2a-bridge said %q", stderr.String())
	}
}
