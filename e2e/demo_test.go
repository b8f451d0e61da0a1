package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

var demoRE = regexp.MustCompile(`demo running.* conversation=(\S+)`)

// TestDemoShowsALiveConversation runs "parley demo" and waits for the
// scripted runner's first complete answer: one message per prompt, with
// text, a tool call, text and finish, replying to the prompt.
func TestDemoShowsALiveConversation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "demo", "-db", filepath.Join(t.TempDir(), "demo.db"), "-addr", "127.0.0.1:0", "-every", "300ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var url, id string
	sc := bufio.NewScanner(stderr)
	for (url == "" || id == "") && sc.Scan() {
		if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
			url = "http://" + m[1]
		}
		if m := demoRE.FindStringSubmatch(sc.Text()); m != nil {
			id = m[1]
		}
	}
	if url == "" || id == "" {
		t.Fatalf("demo did not start: url %q conversation %q", url, id)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	c := client.New(url, "")
	for {
		evs, err := c.Events(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type != parley.EventMessageUpdated || e.Finality != parley.FinalityTurn {
				continue
			}
			var answer parley.Message
			if err := json.Unmarshal(e.Data, &answer); err != nil {
				t.Fatal(err)
			}
			prompt, err := c.Message(ctx, id, answer.ReplyTo)
			if err != nil {
				t.Fatalf("the answer replies to %q: %v", answer.ReplyTo, err)
			}
			var kinds []string
			for _, p := range answer.Parts {
				kinds = append(kinds, p.Type)
			}
			if strings.Join(kinds, ",") != "text,tool-call,text,finish" || answer.Status != parley.StatusComplete || prompt.Role != parley.RoleUser || answer.TurnID != prompt.ID {
				t.Fatalf("demo answer: parts %v, status %s, prompt role %s, turnId %q", kinds, answer.Status, prompt.Role, answer.TurnID)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no complete answer from the demo in time")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
