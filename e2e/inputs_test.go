package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/client"
)

// TestInputRequestSurvivesAServerCrash: a runner asks for approval; the
// server is killed (SIGKILL) while the request is pending; after a restart
// the request is still pending (in the message, the head and the list),
// the runner reconnects and is told what it asked, a person answers, and
// the runner gets the answer.
func TestInputRequestSurvivesAServerCrash(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, srv, id, c := startStreaming(t, ctx)
	ask := `{"type":"message.part.input-request","turnId":"r1","requestId":"deploy-1","kind":"approval","toolName":"deploy","args":{"env":"prod"},"title":"Deploy to prod?"}`
	if r, err := runnerFrame(ctx, c, ask); err != nil || r["type"] != "ack" {
		t.Fatalf("ask: %v %v", r, err)
	}
	srv.kill()
	c.CloseNow()

	srv2 := startServer(t, db)
	m, err := client.New(srv2.url, "").Message(ctx, id, "r1")
	if err != nil || !m.AwaitingInput || len(m.Parts) != 1 || m.Parts[0].RequestID != "deploy-1" || m.Parts[0].Status != "pending" {
		t.Fatalf("after the crash the message is %+v (%v)", m, err)
	}
	v, err := client.New(srv2.url, "").Conversation(ctx, id)
	if err != nil || len(v.Head.PendingInputs) != 1 {
		t.Fatalf("after the crash the head lists %+v pending (%v)", v, err)
	}

	c2 := dialRunner(t, ctx, srv2.url, id)
	defer c2.CloseNow()
	frames := make(chan map[string]any, 16)
	go func() {
		for {
			_, data, err := c2.Read(ctx)
			if err != nil {
				close(frames)
				return
			}
			var f map[string]any
			_ = json.Unmarshal(data, &f)
			frames <- f
		}
	}()
	next := func(typ string) map[string]any {
		t.Helper()
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("the runner's connection ended before a %s frame", typ)
				}
				if f["type"] == typ {
					return f
				}
			case <-ctx.Done():
				t.Fatalf("no %s frame", typ)
			}
		}
	}
	if f := next("input.pending"); f["requestId"] != "deploy-1" {
		t.Fatalf("the reconnected runner was told %v", f)
	}
	body := `{"agentId":"ops","answer":{"approved":true,"reason":"go"}}`
	res, err := http.Post(srv2.url+"/v1/conversations/"+id+"/inputs/deploy-1", "application/json", strings.NewReader(body))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("answer: %v %v", res, err)
	}
	res.Body.Close()
	f := next("input.answered")
	if f["requestId"] != "deploy-1" || f["answeredBy"] != "ops" || f["answer"].(map[string]any)["approved"] != true {
		t.Fatalf("the runner got %v", f)
	}
	_ = c2.Write(ctx, websocket.MessageText, []byte(`{"type":"input.ack","requestId":"deploy-1"}`))
	_ = c2.Write(ctx, websocket.MessageText, []byte(`{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`))
	for {
		m, err := client.New(srv2.url, "").Message(ctx, id, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if m.Status == "complete" {
			if p := m.Parts[0]; p.Status != "answered" || p.AnsweredBy != "ops" {
				t.Fatalf("the finished message holds %+v", p)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
