package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

var demoRE = regexp.MustCompile(`msg="demo running.*" conversation=(\S+) ui=(\S+) tail="([^"]+)"`)

// demoRun is one "parley demo" process and its conversation.
type demoRun struct {
	url, id, ui, tail string
	c                 *client.Client
	mu                sync.Mutex
	logs              strings.Builder
}

// startDemo runs "parley demo" with short intervals and waits until its
// scene is set.
func startDemo(t *testing.T, ctx context.Context, args ...string) *demoRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, append([]string{"demo", "-db", filepath.Join(t.TempDir(), "demo.db"), "-addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	d := &demoRun{}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.mu.Lock()
			d.logs.WriteString(sc.Text() + "\n")
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				d.url = "http://" + m[1]
			}
			if m := demoRE.FindStringSubmatch(sc.Text()); m != nil && d.id == "" {
				d.id, d.ui, d.tail = m[1], m[2], m[3]
				close(ready)
			}
			d.mu.Unlock()
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("the demo did not start:\n%s", d.log())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.c = client.New(d.url, "")
	return d
}

// notes is the demo's log without the line of each request.
func (d *demoRun) notes() string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(d.log(), "\n") {
		if !strings.Contains(line, "msg=request ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func (d *demoRun) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// waitLog reads the conversation's log until ok holds for it, or fails
// the test saying what did not appear.
func (d *demoRun) waitLog(t *testing.T, ctx context.Context, what func() string, ok func(log []parley.Event) bool) []parley.Event {
	t.Helper()
	for {
		log, _ := readLog(t, ctx, d.c, d.id)
		if ok(log) {
			return log
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the demo's log shows no %s in time (%d events); the demo's own log, but for its requests:\n%s", what(), len(log), d.notes())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// messageOf decodes the message of a message or message.updated event.
func messageOf(t *testing.T, e parley.Event) *parley.Message {
	t.Helper()
	var m parley.Message
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// promptEvent decodes the data of a prompt.* event.
func promptEvent(e parley.Event) (id, reason string) {
	var p struct{ ID, Reason string }
	_ = json.Unmarshal(e.Data, &p)
	return p.ID, p.Reason
}

// TestDemoShowsEveryFeature runs "parley demo" and finds each part of its
// scene in the conversation's log within a bounded time: the supervisor's
// answers streamed with a tool call (running, then completed), a worker
// delegated into the same turn and exchange, the reviewer's reply in a
// thread, a failover and its retry, the scheduled task's runs answered, a
// message nobody answers (marked so in the Markdown export), and the UI
// served at the conversation's URL it prints.
func TestDemoShowsEveryFeature(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startDemo(t, ctx, "-every", "300ms", "-task-every", "2s", "-approval-wait", "1s")
	if d.ui != d.url+"/c/"+d.id || !strings.HasSuffix(d.tail, " tail -server "+d.url+" "+d.id) {
		t.Fatalf("the demo prints ui %q and tail %q for %s on %s", d.ui, d.tail, d.id, d.url)
	}
	resp, err := http.Get(d.ui)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET %s: %d %q", d.ui, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	v, err := d.c.Conversation(ctx, d.id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.Conversation.Title, "Parley demo") || !strings.Contains(strings.Join(v.Conversation.Members, ","), "you") {
		t.Fatalf("the demo's conversation: title %q, members %v", v.Conversation.Title, v.Conversation.Members)
	}

	seen := map[string]string{} // feature → what showed it
	features := []string{"streamed answer", "tool call running then completed", "worker in the turn", "review in a thread", "failover and retry", "scheduled task answered", "scripted person answered"}
	missing := func() string {
		var m []string
		for _, f := range features {
			if seen[f] == "" {
				m = append(m, f)
			}
		}
		return strings.Join(m, ", ")
	}
	d.waitLog(t, ctx, missing, func(log []parley.Event) bool {
		msgs, chunks, tools := map[string]*parley.Message{}, map[string]int{}, map[string]string{}
		delegated := map[int]bool{}
		runs := map[string]bool{}
		for _, e := range log {
			switch e.Type {
			case parley.EventMessage, parley.EventMessageUpdated:
				m := messageOf(t, e)
				msgs[m.ID] = m
			case parley.EventChunk:
				var c struct{ MessageID string }
				_ = json.Unmarshal(e.Data, &c)
				chunks[c.MessageID]++
			case parley.EventPartUpdated:
				var p struct {
					MessageID string
					Part      parley.Part
				}
				_ = json.Unmarshal(e.Data, &p)
				tools[p.MessageID+" "+p.Part.CallID] += p.Part.Status + ","
			case parley.EventDelegation:
				if e.AgentID == "supervisor" && strings.Contains(string(e.Data), `"to":"worker"`) {
					delegated[e.Turn] = true
				}
			case "task.run":
				var r struct{ RunID string }
				_ = json.Unmarshal(e.Data, &r)
				runs[r.RunID] = true
			}
		}
		for _, m := range msgs {
			if m.AgentID != "supervisor" || m.Status != parley.StatusComplete {
				continue
			}
			var kinds []string
			for _, p := range m.Parts {
				kinds = append(kinds, p.Type)
				if p.Type == parley.PartToolCall && tools[m.ID+" "+p.CallID] == "running,completed," {
					seen["tool call running then completed"] = m.ID
				}
			}
			prompt := msgs[m.ReplyTo]
			if strings.Join(kinds, ",") == "text,tool-call,text,finish" && chunks[m.ID] > 5 && prompt != nil && prompt.Role == parley.RoleUser && m.TurnID == prompt.ID {
				seen["streamed answer"] = m.ID
			}
			for _, w := range msgs {
				if w.AgentID == "worker" && w.Turn == m.Turn && w.TurnID == m.TurnID && delegated[m.Turn] && w.Seq > m.Seq {
					seen["worker in the turn"] = w.ID
				}
				if w.AgentID == "reviewer" && w.ReplyTo == m.ID && w.Depth == m.Depth+1 {
					seen["review in a thread"] = w.ID
				}
			}
			if failed := msgs[m.RetryOf]; failed != nil && failed.Status == parley.StatusError && failed.Turn == m.Turn && failed.TurnID == m.TurnID {
				seen["failover and retry"] = failed.ID + " → " + m.ID
			}
			if runs[m.TurnID] && prompt != nil && prompt.AgentID == "scheduler" {
				seen["scheduled task answered"] = m.TurnID
			}
			if prompt != nil && prompt.AgentID == "human" {
				seen["scripted person answered"] = prompt.Content
			}
		}
		return len(seen) == len(features)
	})
	t.Logf("seen: %v", seen)

	var md bytes.Buffer
	if _, err := d.c.Export(ctx, d.id, "markdown", &md); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`From: HUMAN · To: supervisor \[in-memory, no reply\]`).Match(md.Bytes()) {
		t.Fatalf("no message nobody answered in the export:\n%.3000s", md.String())
	}
	quiet(t, d)
}

// TestDemoAnswersAPersonAndSurvivesStops: the demo's agents answer what
// the person using the UI asks (a prompt from the member "you"): streamed,
// with a tool call. The person stops one answer, steers past another and
// reverts a third while they stream; each ends canceled, and the demo
// goes on answering, logging no error; until the conversation is deleted.
func TestDemoAnswersAPersonAndSurvivesStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startDemo(t, ctx, "-every", "1s", "-approve-every", "0")
	ask := func(content, mode string) string {
		t.Helper()
		id, err := d.c.Ask(ctx, d.id, "you", content, mode)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	post := func(path, body string) {
		t.Helper()
		var out map[string]any
		if status := callJSON(t, ctx, "POST", d.url+"/v1/conversations/"+d.id+path, body, &out); status/100 != 2 {
			t.Fatalf("POST %s: %d %v", path, status, out)
		}
	}
	// streaming waits until an answer to prompt streams its text after a
	// tool call, and returns its id.
	streaming := func(prompt string) string {
		t.Helper()
		var answer string
		d.waitLog(t, ctx, func() string { return "streaming answer to " + prompt }, func(log []parley.Event) bool {
			tool := false
			for _, e := range log {
				switch {
				case e.Type == parley.EventMessage && e.AgentID == "supervisor" && messageOf(t, e).ReplyTo == prompt && strings.HasPrefix(messageOf(t, e).ID, "answer-"):
					answer = messageOf(t, e).ID
				case e.Type == parley.EventPartUpdated && answer != "" && strings.Contains(string(e.Data), `"messageId":"`+answer+`"`):
					tool = true
				case e.Type == parley.EventChunk && tool && strings.Contains(string(e.Data), `"messageId":"`+answer+`"`):
					return true
				}
			}
			return false
		})
		return answer
	}
	// ended waits until prompt ended for reason, and its answer with it.
	ended := func(prompt, answer, reason string) {
		t.Helper()
		d.waitLog(t, ctx, func() string { return "end of prompt " + prompt + ", " + reason }, func(log []parley.Event) bool {
			aborted, canceled := false, false
			for _, e := range log {
				id, why := promptEvent(e)
				aborted = aborted || e.Type == "prompt.aborted" && id == prompt && why == reason
				canceled = canceled || e.Type == "prompt.canceled" && id == prompt && why == "aborted"
			}
			return aborted && canceled
		})
		if reason == "reverted" {
			return // its answer is gone
		}
		if m, err := d.c.Message(ctx, d.id, answer); err != nil || m.Status != parley.StatusCanceled {
			t.Fatalf("the stopped answer %s: %+v %v", answer, m, err)
		}
	}

	stopped := ask("Tell me about Parley, at length please.", "")
	a := streaming(stopped)
	post("/abort", `{"agentId":"you"}`)
	ended(stopped, a, "stopped")

	steered := ask("And what about turns?", "")
	a = streaming(steered)
	steer := ask("Actually: what is 17 times 23?", "steer")
	ended(steered, a, "steered")

	reverted := ask("One more thing.", "")
	a = streaming(reverted)
	post("/revert", fmt.Sprintf(`{"agentId":"you","messageId":%q}`, a))
	ended(reverted, a, "reverted")

	// The steer was answered, and so is a question after all that.
	last := ask("Are you still there?", "")
	for _, p := range []string{steer, last} {
		d.waitLog(t, ctx, func() string { return "complete answer to " + p }, func(log []parley.Event) bool {
			for _, e := range log {
				if e.Type == parley.EventMessageUpdated {
					if m := messageOf(t, e); m.ReplyTo == p && m.Status == parley.StatusComplete && m.AgentID == "supervisor" {
						return strings.Contains(m.Content, "The answer is") && (p != steer || strings.Contains(m.Content, "391"))
					}
				}
			}
			return false
		})
	}
	if n := strings.Count(d.log(), `msg="demo answer stopped"`); n < 3 {
		t.Errorf("the demo logged %d stopped answers, want 3 at least", n)
	}

	// Deleting the conversation (as an admin may, from the UI) ends the
	// scene quietly.
	if err := d.c.DeleteConversation(ctx, d.id); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(d.log(), "the scripted agents stop") || !strings.Contains(d.log(), "the scripted person stops asking") {
		select {
		case <-ctx.Done():
			t.Fatalf("the demo did not stop its agents when its conversation was deleted:\n%s", d.notes())
		case <-time.After(100 * time.Millisecond):
		}
	}
	quiet(t, d)
}

// quiet fails the test if the demo logged an error, or a warning other
// than the one every open server gives at start.
func quiet(t *testing.T, d *demoRun) {
	t.Helper()
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") && !strings.Contains(line, "running OPEN") {
			t.Errorf("the demo logged: %s", line)
		}
	}
}

// TestDemoHasAnMCPOnlyAgent: the demo's scribe takes part through MCP
// only. It is a participant, holds no runner, and gets the floor by the
// turn policy after the reviewer: it claims that turn and writes the
// minutes of what it read (the reviewer's reply among them) in its own
// name, in the review's thread, ending its turn, again and again. Deleting the conversation stops
// it quietly.
func TestDemoHasAnMCPOnlyAgent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startDemo(t, ctx, "-every", "2s", "-approve-every", "0")
	v, err := d.c.Conversation(ctx, d.id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(v.Conversation.Participants, "scribe") {
		t.Fatalf("the scribe is not a participant: %v", v.Conversation.Participants)
	}

	var minutes []*parley.Message
	d.waitLog(t, ctx, func() string { return "two minutes of the scribe's, each after a review it names" }, func(log []parley.Event) bool {
		minutes = minutes[:0]
		claimed := map[int]bool{}
		lastReview := ""
		for _, e := range log {
			switch {
			case e.Type == parley.EventTurnClaimed && e.AgentID == "scribe":
				claimed[e.Turn] = true
			case e.Type == parley.EventMessage && e.AgentID == "reviewer":
				lastReview = messageOf(t, e).ID
			case e.Type == parley.EventMessage && e.AgentID == "scribe":
				m := messageOf(t, e)
				if m.Role != parley.RoleAssistant || m.Finality != parley.FinalityTurn || !claimed[m.Turn] ||
					!strings.HasPrefix(m.Content, "Minutes since my last turn (I take part through MCP only)") ||
					lastReview == "" || m.ReplyTo != lastReview || !strings.Contains(m.Content, "**reviewer**: Looks good to me.") {
					t.Fatalf("a message of the scribe's is not the minutes of the review before it, in its thread, in a turn it claimed: %+v (the review %q, claimed turns %v)", m, lastReview, claimed)
				}
				minutes, lastReview = append(minutes, m), ""
			}
		}
		return len(minutes) >= 2
	})
	if !strings.Contains(minutes[1].Content, "**supervisor**: The answer is ") {
		t.Fatalf("the scribe's second minutes do not name the supervisor's answer:\n%s", minutes[1].Content)
	}

	// It holds no runner: the guidance's presence names the supervisor's
	// runner only; and the demo's server served its MCP requests.
	v, err = d.c.Conversation(ctx, d.id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Guidance == nil || !slices.Equal(v.Guidance.Runners, []string{"supervisor"}) {
		t.Fatalf("the demo's runners: %+v, want the supervisor's only", v.Guidance)
	}
	if !strings.Contains(d.log(), `route="POST /v1/mcp"`) {
		t.Fatalf("the demo's server logged no MCP request:\n%.3000s", d.log())
	}

	if err := d.c.DeleteConversation(ctx, d.id); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(d.log(), "the scribe stops") {
		select {
		case <-ctx.Done():
			t.Fatalf("the scribe did not stop when its conversation was deleted:\n%s", d.notes())
		case <-time.After(100 * time.Millisecond):
		}
	}
	quiet(t, d)
}
