package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestExportImportCLI moves a conversation from one server to another with
// "parley export" and "parley import", as an operator would, and imports
// legacy rows with their warnings.
func TestExportImportCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from, to := startServer(t, filepath.Join(dir, "from.db")), startServer(t, filepath.Join(dir, "to.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(from.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "moving", Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	for _, m := range []client.Message{
		{ID: "q", AgentID: "alice", Role: parley.RoleUser, Content: "which way?", Finality: parley.FinalityTurn},
		{ID: "r", AgentID: "a", Content: "north", ReplyTo: "q", Finality: parley.FinalityTurn},
		{ID: "s", AgentID: "b", Content: "agreed", ReplyTo: "r", Finality: parley.FinalityTurn},
	} {
		if _, err := c.PostMessage(ctx, id, m); err != nil {
			t.Fatal(err)
		}
	}

	md := runParley(t, "export", "-server", from.url, id)
	for _, want := range []string{"# moving", "**From: HUMAN (alice) · To: a**", "**Agent: a (reply to alice)**", "**Agent: b (reply to a)**"} {
		if !strings.Contains(md, want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md)
		}
	}
	file := filepath.Join(dir, "moving.jsonl")
	runParley(t, "export", "-server", from.url, "-format", "jsonl", "-o", file, id)
	out, stderr := runParleyErr(t, "import", "-server", to.url, "-progress", "on", file)
	if !strings.Contains(out, "imported "+id+" (export): 4 events, 3 messages") {
		t.Fatalf("import said %q", out)
	}
	if !strings.Contains(stderr, "importing 100% [##############################]") {
		t.Fatalf("no finished progress bar on stderr: %q", stderr)
	}
	first, _ := os.ReadFile(file)
	again := runParley(t, "export", "-server", to.url, "-format", "jsonl", id)
	epoch := regexp.MustCompile(`"epoch":"[^"]*"`)
	if a, b := epoch.ReplaceAll(bytes.TrimSpace(first), nil), epoch.ReplaceAll([]byte(again), nil); !bytes.Equal(a, b) {
		t.Fatalf("the moved conversation differs:\n%s\n%s", a, b)
	}

	legacy := filepath.Join(dir, "legacy.jsonl")
	rows := `{"agentId":"a1","role":"user","sender":"HUMAN","content":"hi","createdAt":"2025-10-25T10:00:00Z"}
{"agentId":"a1","role":"assistant","sender":"a1","content":"hello","messageId":"m2","createdAt":"2025-10-25T10:00:01Z"}
`
	if err := os.WriteFile(legacy, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr = runParleyErr(t, "import", "-server", to.url, "-id", "old", "-title", "Old chat", legacy)
	if !strings.Contains(out, "imported old (legacy): 3 events, 2 messages") ||
		!strings.Contains(stderr, "warning: row 1: no-id: no messageId: made id legacy-1") ||
		!strings.Contains(stderr, "warning: row 2: no-reply-to:") || strings.Contains(stderr, "importing") {
		t.Fatalf("legacy import:\n%s\n%s", out, stderr)
	}
	if _, stderr := runParleyFail(t, "import", "-server", to.url, file); !strings.Contains(stderr, "busy") {
		t.Fatalf("importing over an existing conversation: %s", stderr)
	}
}

// runParleyErr is runParley that also returns stderr.
func runParleyErr(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := runParleyRaw(args...)
	if err != nil {
		t.Fatalf("parley %v: %v\n%s", args, err, errOut)
	}
	return out, errOut
}

// runParleyFail runs a subcommand that must fail.
func runParleyFail(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := runParleyRaw(args...)
	if err == nil {
		t.Fatalf("parley %v succeeded: %s", args, out)
	}
	return out, errOut
}

func runParleyRaw(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return strings.TrimSpace(out.String()), errOut.String(), err
}

// TestImportOwnExportWithStoppedAnswer exports, with "parley export", a
// conversation whose answer was stopped (a prompt.aborted in its log) and
// imports it back into the same server under another id with "parley
// import -id": the copy's log is the original's.
func TestImportOwnExportWithStoppedAnswer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, filepath.Join(dir, "parley.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "stopped", Participants: []string{"bot"}, Members: []string{"human"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	r, err := c.ConnectRunner(ctx, id, "bot")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := c.QueuePrompt(ctx, id, client.NewPrompt{ID: "p1", AgentID: "human", Content: "tell me a long story"}); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Next(ctx); err != nil || p.PromptID != "p1" {
		t.Fatalf("the runner got %+v, %v", p, err)
	}
	if _, err := r.Create(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "a1", "Once upon a time"); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, id); err != nil { // the UI's Stop
		t.Fatal(err)
	}
	if p, err := r.Next(ctx); err != nil || p.Type != "abort" {
		t.Fatalf("the runner got %+v, %v; want an abort", p, err)
	}
	if _, err := r.Aborted(ctx); err != nil {
		t.Fatal(err)
	}
	log, _ := readLog(t, ctx, c, id)
	if !slices.ContainsFunc(log, func(e parley.Event) bool { return e.Type == client.EventPromptAborted }) {
		t.Fatal("the log has no prompt.aborted")
	}

	file := filepath.Join(dir, "stopped.jsonl")
	runParley(t, "export", "-server", srv.url, "-format", "jsonl", "-o", file, id)
	out := runParley(t, "import", "-server", srv.url, "-id", "copy", file)
	if !strings.Contains(out, "imported copy (export)") {
		t.Fatalf("import said %q", out)
	}
	copied, _ := readLog(t, ctx, c, "copy")
	if len(copied) != len(log) {
		t.Fatalf("the copy has %d events, the original %d", len(copied), len(log))
	}
	for i := range log {
		a, b := log[i], copied[i]
		if a.Type == parley.EventConversationCreated {
			continue // its id and epoch differ
		}
		a.ConversationID, b.ConversationID = "", ""
		if ja, jb := fmt.Sprint(a.Seq, a.Type, a.Turn, a.TurnID, a.AgentID, a.Finality, a.Time, string(a.Data)),
			fmt.Sprint(b.Seq, b.Type, b.Turn, b.TurnID, b.AgentID, b.Finality, b.Time, string(b.Data)); ja != jb {
			t.Fatalf("event %d differs:\n%s\n%s", a.Seq, ja, jb)
		}
	}
}
