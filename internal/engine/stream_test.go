package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
)

// TestStreamingSurvivesARestart streams a response through one engine,
// drops it mid-message, and finishes the message through a new engine on the
// same file: the new engine rebuilds the message from its last row and the
// chunks after it, so no delta is lost and the row was rewritten only at
// checkpoints and part boundaries.
func TestStreamingSurvivesARestart(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{})
	id := b.conversation(t, parley.PolicyFree)
	bot := conv.Actor{AgentID: "bot"}
	if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: "r1", Role: parley.RoleAssistant, Streaming: true}); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 0; i < 150; i++ {
		delta := fmt.Sprintf("w%d ", i)
		want.WriteString(delta)
		if _, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r1", Delta: delta}); err != nil {
			t.Fatal(err)
		}
	}
	row, err := b.db.GetMessage(b.ctx, id, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != parley.StatusStreaming || len(row.Content) >= want.Len() || row.UpdatedSeq <= row.Seq {
		t.Fatalf("row mid-stream: status %s, %d of %d bytes, as of %d", row.Status, len(row.Content), want.Len(), row.UpdatedSeq)
	}

	// A new engine on the same store: the cache is empty, the message is rebuilt.
	next := engine.New(b.db, engine.Options{})
	defer next.Close()
	if _, err := next.StreamTool(b.ctx, id, conv.StreamTool{Actor: bot, MessageID: "r1", Tool: conv.ToolUpdate{CallID: "c1", ToolName: "calc", Status: parley.ToolCompleted, Result: json.RawMessage(`42`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := next.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: "r1", Delta: "done"}); err != nil {
		t.Fatal(err)
	}
	res, err := next.FinalizeMessage(b.ctx, id, conv.FinalizeMessage{Actor: bot, MessageID: "r1", Reason: parley.FinishEndTurn, Finality: parley.FinalityTurn})
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.db.GetMessage(b.ctx, id, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Content != want.String()+"done" || m.Status != parley.StatusComplete || len(m.Parts) != 4 || m.Parts[1].Type != parley.PartToolCall {
		t.Fatalf("final row: %d parts, status %s, content ok %v", len(m.Parts), m.Status, m.Content == want.String()+"done")
	}
	if res.Message.Content != m.Content {
		t.Fatal("the answer and the row differ")
	}
	// Rows were rewritten at the checkpoints (every 64 chunks), the tool
	// boundary and the finalize: the chunks themselves are the rest.
	checkpoints, chunks := 0, 0
	for _, e := range b.events(t, id) {
		if e.Type == parley.EventChunk {
			chunks++
			var c parley.Chunk
			_ = json.Unmarshal(e.Data, &c)
			if c.Checkpoint {
				checkpoints++
			}
		}
	}
	if chunks != 151 || checkpoints != 2 {
		t.Fatalf("%d chunks with %d checkpoints, want 151 and 2", chunks, checkpoints)
	}
}
