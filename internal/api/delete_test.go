package api_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/store"
)

// TestDeleteConversation deletes a conversation that has messages, an
// idempotency record, a queued prompt, a task, a streaming message, two
// live subscribers and a runner: only an admin may; the subscribers and the
// runner are told and closed; every read and write is a 404 after it; no
// row is left; and the id can be created and imported again.
func TestDeleteConversation(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	b, _ := setupRunners(t, engine.Options{Logger: log}, runners.Options{Grace: 100 * time.Millisecond, Logger: log}, api.Options{})
	id := b.conversation("alice", "bob")
	path := "/v1/conversations/" + id
	b.want(b.do("POST", path+"/messages", b.bob, map[string]any{"id": "m1", "content": "hi", "finality": "turn", "clientRequestId": "k1"}), 201, "")
	task := b.do("POST", "/v1/tasks", b.alice, map[string]any{"conversationId": id, "prompt": "standup", "everyMs": 3600000})
	b.want(task, 201, "")
	jsonl := b.do("GET", path+"/export?format=jsonl", b.viewer, nil).raw

	nextSSE, _ := b.openSSE(id, "")
	nextSSE() // init
	ws := b.dialWS(id, "")
	readFrame(t, b.ctx, ws) // init
	runner := b.runnerConn(id, b.alice)
	b.want(b.do("POST", path+"/prompts", b.bob, map[string]any{"content": "report"}), 201, "")
	until(t, b, runner, "prompt")
	do(t, b, runner, `{"type":"message.create","turnId":"r1"}`)
	do(t, b, runner, `{"type":"message.part.text-delta","turnId":"r1","delta":"working"}`)

	b.want(b.do("DELETE", path, b.alice, nil), 403, "forbidden")
	b.want(b.do("DELETE", path, b.viewer, nil), 403, "forbidden")
	b.want(b.do("DELETE", "/v1/conversations/nope", b.admin, nil), 404, "not_found")
	b.want(b.do("GET", path, b.viewer, nil), 200, "") // refused deletes changed nothing
	if r := b.do("DELETE", path, b.admin, nil); r.status != http.StatusNoContent || len(r.raw) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}

	// Each stream ends with an error frame saying why, the WebSocket ones
	// then with close code 4404.
	for {
		ev := nextSSE()
		if ev.event == "error" {
			wantDeleted(t, ev.data, id)
			break
		}
	}
	for _, c := range []*websocket.Conn{ws, runner} {
		for {
			f := readFrame(t, b.ctx, c)
			if f["type"] == "error" && f["turnId"] == nil {
				wantDeleted(t, f, id)
				break
			}
		}
		if _, _, err := c.Read(b.ctx); websocket.CloseStatus(err) != 4404 {
			t.Fatalf("after the error frame: %v, want close status 4404", err)
		}
	}

	for _, p := range []string{"", "/events", "/messages", "/messages/m1", "/messages/m1/replies", "/messages/m1/thread", "/prompts", "/export", "/stream"} {
		b.want(b.do("GET", path+p, b.viewer, nil), 404, "not_found")
	}
	b.want(b.do("POST", path+"/messages", b.alice, map[string]any{"content": "late"}), 404, "not_found")
	b.want(b.do("DELETE", path, b.admin, nil), 404, "not_found")
	if r := b.do("GET", "/v1/conversations", b.viewer, nil); strings.Contains(string(r.raw), id) {
		t.Fatalf("a deleted conversation is listed: %s", r.raw)
	}
	// Nothing is left in the store.
	_, err := b.db.GetConversation(b.ctx, id)
	wantCode(t, err, parley.ENOTFOUND)
	_, err = b.db.GetIdempotency(b.ctx, id, "bob", "k1")
	wantCode(t, err, parley.ENOTFOUND)
	_, err = b.db.GetTask(b.ctx, task.body["id"].(string))
	wantCode(t, err, parley.ENOTFOUND)
	evs, err := b.db.ReadEvents(b.ctx, store.ReadEventsParams{ConversationID: id, Limit: 100})
	ms, merr := b.db.ListMessages(b.ctx, store.ListMessagesParams{ConversationID: id, Limit: 100})
	if len(evs) != 0 || len(ms) != 0 || err != nil || merr != nil {
		t.Fatalf("left in the store: %d events, %d messages (%v, %v)", len(evs), len(ms), err, merr)
	}

	// The id is free: created again, deleted again, imported again.
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": id, "participants": []string{"carol"}}), 201, "")
	if r := b.do("DELETE", path, b.admin, nil); r.status != http.StatusNoContent {
		t.Fatalf("deleting the new one: %d %s", r.status, r.raw)
	}
	b.want(b.do("POST", "/v1/conversations/import", b.admin, jsonl), 201, "")
	if r := b.do("GET", path+"/messages", b.viewer, nil); len(r.body["messages"].([]any)) != 1 {
		t.Fatalf("the re-imported conversation: %s", r.raw)
	}
	// The runner's grace period is over by now: a runner of a deleted
	// conversation left no prompt to requeue and no message to finalize.
	time.Sleep(200 * time.Millisecond)
	if out := logs.String(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("the engine complained after the delete:\n%s", out)
	}
}

// wantDeleted checks an error frame: not_found, saying the conversation was deleted.
func wantDeleted(t *testing.T, frame map[string]any, id string) {
	t.Helper()
	e, _ := frame["error"].(map[string]any)
	if e["code"] != "not_found" || e["message"] != "conversation "+id+" was deleted" {
		t.Fatalf("error frame %v, want not_found saying the conversation was deleted", frame)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if parley.ErrorCode(err) != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}
