package api_test

import (
	"testing"

	"github.com/parleyhq/parley/api"
	"github.com/parleyhq/parley/engine"
)

func TestTasksEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation()
	for body, code := range map[string]string{
		`{"conversationId":"` + id + `","prompt":"x","cron":"every day"}`:                "invalid_value",
		`{"conversationId":"` + id + `","prompt":"x","cron":"0 9 * * *","everyMs":1000}`: "invalid_value",
		`{"conversationId":"` + id + `","prompt":"x","everyMs":10}`:                      "invalid_value",
		`{"conversationId":"` + id + `","prompt":"","everyMs":1000}`:                     "invalid_value",
		`{"conversationId":"nope","prompt":"x","everyMs":1000}`:                          "not_found",
	} {
		r := b.do("POST", "/v1/tasks", b.alice, body)
		if r.code() != code {
			t.Fatalf("%s: %d %s, want %s", body, r.status, r.raw, code)
		}
	}
	r := b.do("POST", "/v1/tasks", b.alice, map[string]any{"conversationId": id, "prompt": "standup", "cron": "0 9 * * 1-5"})
	b.want(r, 201, "")
	if r.body["agentId"] != "alice" || r.body["nextRunAt"] == nil {
		t.Fatalf("task = %s", r.raw)
	}
	tid := r.body["id"].(string)
	r = b.do("GET", "/v1/tasks", b.viewer, nil)
	if len(r.body["tasks"].([]any)) != 1 {
		t.Fatalf("tasks = %s", r.raw)
	}
	b.want(b.do("DELETE", "/v1/tasks/"+tid, b.viewer, nil), 403, "forbidden")
	if r := b.do("DELETE", "/v1/tasks/"+tid, b.alice, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	b.want(b.do("DELETE", "/v1/tasks/"+tid, b.alice, nil), 404, "not_found")
}
