package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
)

// TestAgentRunnerAcrossNodes: an agent-wide runner attached to node A
// answers a prompt posted on node B in a conversation made on B, which A
// has never seen (B's notice that a queue changed makes A look); the
// answer is read back through B.
func TestAgentRunnerAcrossNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	unused := filepath.Join(t.TempDir(), "unused.db")
	na, nb := startServer(t, unused, "-postgres", url), startServer(t, unused, "-postgres", url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(na.url, "http")+"/v1/agents/assistant/runner", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer run.CloseNow()
	b := client.New(nb.url, "")
	v, err := b.CreateConversation(ctx, client.NewConversation{Participants: []string{"assistant"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	prompt, err := b.Ask(ctx, id, "human", "What is 6 x 7?", "")
	if err != nil {
		t.Fatal(err)
	}
	read := func() map[string]any {
		t.Helper()
		_, data, err := run.Read(ctx)
		if err != nil {
			t.Fatalf("the runner on node A: %v", err)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := read(); f["type"] != "prompt" || f["conversationId"] != id || f["messageId"] != prompt {
		t.Fatalf("the runner on node A got %v, want the prompt %s of %s", f, prompt, id)
	}
	for _, frame := range []string{
		`{"type":"message.create","conversationId":%q,"turnId":"answer"}`,
		`{"type":"message.part.text-delta","conversationId":%q,"turnId":"answer","delta":"42"}`,
		`{"type":"message.finalize","conversationId":%q,"turnId":"answer","reason":"end_turn"}`,
		`{"type":"complete","conversationId":%q}`,
	} {
		if err := run.Write(ctx, websocket.MessageText, fmt.Appendf(nil, frame, id)); err != nil {
			t.Fatal(err)
		}
		if f := read(); f["type"] != "ack" || f["conversationId"] != id {
			t.Fatalf("%s answered %v", frame, f)
		}
	}
	m, err := b.Message(ctx, id, "answer")
	if err != nil || m.Content != "42" || m.Status != parley.StatusComplete || m.ReplyTo != prompt || m.AgentID != "assistant" {
		t.Fatalf("the answer read through node B: %+v, %v", m, err)
	}
}
