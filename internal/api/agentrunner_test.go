package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// agentRunnerConn dials the agent-wide runner WebSocket of agent with
// token ("" for none: an open server).
func (b *bundle) agentRunnerConn(agent, token string) *websocket.Conn {
	b.t.Helper()
	u := "ws" + strings.TrimPrefix(b.url, "http") + "/v1/agents/" + agent + "/runner"
	c, _, err := websocket.Dial(b.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {bearer(token)}}})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { c.CloseNow() })
	return c
}

// wideRunner answers every prompt an agent-wide connection is handed, as
// alice: a message of one delta replying to it, then complete. It counts
// what it answered and the error frames it was sent.
type wideRunner struct {
	c        *websocket.Conn
	mu       sync.Mutex
	answered map[string]string // conversation → prompt
	errors   []string
}

func (w *wideRunner) run(ctx context.Context) {
	for {
		_, data, err := w.c.Read(ctx)
		if err != nil {
			return
		}
		var f struct {
			Type, ConversationID, MessageID string
			Error                           any
		}
		_ = json.Unmarshal(data, &f)
		switch f.Type {
		case "prompt":
			w.mu.Lock()
			w.answered[f.ConversationID] = f.MessageID
			w.mu.Unlock()
			for _, frame := range []string{
				`{"type":"message.create","conversationId":%q,"turnId":"r-%s"}`,
				`{"type":"message.part.text-delta","conversationId":%q,"turnId":"r-%s","delta":"an answer"}`,
				`{"type":"message.finalize","conversationId":%q,"turnId":"r-%s","reason":"end_turn"}`,
				`{"type":"complete","conversationId":%q,"messageId":%q}`,
			} {
				if err := w.c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, frame, f.ConversationID, f.MessageID)); err != nil {
					return
				}
			}
		case "error":
			w.mu.Lock()
			w.errors = append(w.errors, string(data))
			w.mu.Unlock()
		}
	}
}

func (w *wideRunner) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.answered)
}

// TestAgentRunnerServesAThousandConversations: two agent-wide connections
// of alice answer the prompts of 1,000 conversations, one prompt each,
// queued over HTTP. Every conversation gets exactly one answer, stored as
// alice's and replying to its prompt; both connections take a fair share;
// no frame is refused. Under -short (the race pass), 100 conversations.
func TestAgentRunnerServesAThousandConversations(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	runners := []*wideRunner{
		{c: b.agentRunnerConn("alice", b.alice), answered: map[string]string{}},
		{c: b.agentRunnerConn("alice", b.alice), answered: map[string]string{}},
	}
	for _, w := range runners {
		go w.run(b.ctx)
	}
	n := 1000
	if testing.Short() {
		n = 100
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.conversation("alice")
		b.prompt(ids[i], fmt.Sprint("p", i), "")
	}
	for deadline := time.Now().Add(time.Minute); runners[0].count()+runners[1].count() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("answered %d and %d of %d prompts in a minute", runners[0].count(), runners[1].count(), n)
		}
	}
	for i, w := range runners {
		if c := w.count(); c < n/4 {
			t.Errorf("connection %d answered %d of %d prompts: not spread over both", i, c, n)
		}
		w.mu.Lock()
		if len(w.errors) > 0 {
			t.Errorf("connection %d was sent errors: %v", i, w.errors)
		}
		w.mu.Unlock()
	}
	for i, id := range ids {
		prompt := fmt.Sprint("p", i)
		r := b.do("GET", "/v1/conversations/"+id+"/messages/r-"+prompt, b.viewer, nil)
		for wait := 0; r.status == 404 && wait < 100; wait++ { // the last finalizes may be on their way
			time.Sleep(10 * time.Millisecond)
			r = b.do("GET", "/v1/conversations/"+id+"/messages/r-"+prompt, b.viewer, nil)
		}
		b.want(r, 200, "")
		if r.body["agentId"] != "alice" || r.body["replyTo"] != prompt || r.body["content"] != "an answer" {
			t.Fatalf("the answer in conversation %d: %s", i, r.raw)
		}
	}
}

// TestAgentRunnerAccess: the agent-wide runner of alice is alice's (or an
// admin's): bob's token and a viewer's are refused; every frame names its
// conversation; a conversation alice takes no part in is refused, with
// nothing written.
func TestAgentRunnerAccess(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	for _, token := range []string{b.bob, b.viewer} {
		status, body := b.dialError("/v1/agents/alice/runner", "Authorization", "Bearer "+token)
		if status != 403 || body != "forbidden" {
			t.Errorf("another agent's or a viewer's token: %d %s", status, body)
		}
	}
	mine := b.conversation("alice")
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"participants": []string{"bob"}})
	b.want(r, 201, "")
	theirs := r.body["conversation"].(map[string]any)["id"].(string) // alice takes no part
	before := b.log(theirs)
	c := b.agentRunnerConn("alice", b.admin) // an admin runs alice
	for _, tc := range []struct{ frame, code string }{
		{`{"type":"message.create","turnId":"r1"}`, "invalid_value"},
		{`{"type":"message.create","conversationId":"../x","turnId":"r1"}`, "invalid_value"},
		{fmt.Sprintf(`{"type":"message.create","conversationId":%q,"turnId":"r1"}`, theirs), "forbidden"},
	} {
		f := send(t, b, c, tc.frame)
		if f["type"] != "error" || f["error"].(map[string]any)["code"] != tc.code {
			t.Errorf("%s answered %v, want error %s", tc.frame, f, tc.code)
		}
	}
	if after := b.log(theirs); after != before {
		t.Fatalf("a refused frame wrote into bob's conversation:\n%s\n%s", before, after)
	}
	f := send(t, b, c, fmt.Sprintf(`{"type":"message.create","conversationId":%q,"turnId":"r1"}`, mine))
	if f["type"] != "ack" || f["conversationId"] != mine {
		t.Fatalf("alice's own conversation: %v", f)
	}
	r = b.do("GET", "/v1/conversations/"+mine+"/messages/r1", b.viewer, nil)
	b.want(r, 200, "")
	if r.body["agentId"] != "alice" {
		t.Fatalf("the admin's runner wrote as %v, want alice", r.body["agentId"])
	}
}
