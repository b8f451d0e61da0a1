package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// callJSON sends a request (body "" for none) and decodes the answer into
// out; it returns the status.
func callJSON(t *testing.T, ctx context.Context, method, url, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // an open server takes JSON only
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %d, %v", method, url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// promptStatus posts a prompt and returns the status and the error body,
// if any.
func promptStatus(t *testing.T, ctx context.Context, url, conv, content string) (int, map[string]any) {
	t.Helper()
	var out struct {
		Error map[string]any `json:"error"`
	}
	status := callJSON(t, ctx, "POST", url+"/v1/conversations/"+conv+"/prompts", `{"agentId":"human","content":"`+content+`"}`, &out)
	return status, out.Error
}

// queued returns how many prompts a conversation's queue holds.
func queued(t *testing.T, ctx context.Context, url, conv string) int {
	t.Helper()
	var out struct {
		Prompts []json.RawMessage `json:"prompts"`
	}
	callJSON(t, ctx, "GET", url+"/v1/conversations/"+conv+"/prompts", "", &out)
	return len(out.Prompts)
}

// TestQueueLimitAcrossARestart runs the binary with -max-queued-prompts 3:
// a fourth prompt is 409 busy with the queue's length, the full
// conversation and another one still take messages, and after a kill -9
// the queue reads back whole and still full; restarted with the default
// limit, it takes more. A limit below 1 is refused at start.
func TestQueueLimitAcrossARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "parley.db")
	srv := startServer(t, db, "-max-queued-prompts", "3")
	c := client.New(srv.url, "")
	ids := make([]string, 2)
	for i := range ids {
		v, err := c.CreateConversation(ctx, client.NewConversation{TurnPolicy: parley.PolicyFree})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = v.Conversation.ID
	}
	full, other := ids[0], ids[1]
	for i := range 3 {
		if _, err := c.Ask(ctx, full, "human", fmt.Sprint("question ", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(url string) {
		t.Helper()
		status, e := promptStatus(t, ctx, url, full, "one too many")
		if status != 409 || e["code"] != "busy" || e["queueLength"] != float64(3) || e["maxQueueLength"] != float64(3) {
			t.Fatalf("a fourth prompt: %d %v", status, e)
		}
	}
	refused(srv.url)
	say := func(c *client.Client, conv, text string) {
		t.Helper()
		if _, err := c.PostMessage(ctx, conv, client.Message{AgentID: "bot", Content: text, Finality: parley.FinalityTurn}); err != nil {
			t.Fatal(err)
		}
	}
	say(c, full, "written beside a full queue")
	say(c, other, "written elsewhere")
	srv.kill()

	srv = startServer(t, db, "-max-queued-prompts", "3")
	c = client.New(srv.url, "")
	if n := queued(t, ctx, srv.url, full); n != 3 {
		t.Fatalf("after a restart the queue holds %d prompts, want 3", n)
	}
	refused(srv.url)
	say(c, full, "after the restart")
	srv.kill()

	srv = startServer(t, db)
	if status, e := promptStatus(t, ctx, srv.url, full, "room under the default limit"); status != 201 {
		t.Fatalf("under the default limit: %d %v", status, e)
	}
	srv.kill()

	refusesToStart(t, ctx, db, "127.0.0.1:0", "limits must be positive", "-max-queued-prompts", "0")
}

// TestCollectWindowFlag runs the binary with -collect-window 1m: two
// prompts in mode collect sent further apart than the default window (2 s)
// are still one prompt (two parts), because the server's window is longer,
// and it collects for a minute after the second. (With the default they would be
// two: the gap on the server is at least the one here.) A window of 0, or
// of more than a day, is refused at start.
func TestCollectWindowFlag(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "parley.db")
	srv := startServer(t, db, "-collect-window", "1m")
	defer srv.stop()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	if _, err := c.Ask(ctx, id, "human", "collect this", "collect"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // past the default window: a precondition, not a measure
	if _, err := c.Ask(ctx, id, "human", "and this", "collect"); err != nil {
		t.Fatal(err)
	}
	queue, err := c.Prompts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(queue) != 1 || len(queue[0].Parts) != 2 || queue[0].Mode != "collect" {
		t.Fatalf("the queue after two collect prompts 2.5 s apart in a window of 1m: %+v", queue)
	}
	// It collects for a minute after the second prompt came, by the
	// server's clock: the time of that prompt's event.
	evs, _, err := c.Events(ctx, id, queue[0].Parts[1]-1, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("the second prompt's event: %v %v", evs, err)
	}
	if got, want := queue[0].Until.Time, evs[0].Time.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("the merged prompt collects until %v, want a minute after its second prompt (%v)", got, want)
	}

	refusesToStart(t, ctx, db, "127.0.0.1:0", "limits must be positive", "-collect-window", "0")
	refusesToStart(t, ctx, db, "127.0.0.1:0", "at most a day", "-collect-window", "25h")
}
