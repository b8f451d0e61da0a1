package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestBadChatRequests: the chat endpoints (POST /v1/chat, GET
// /v1/chat/{id}/stream, POST /v1/ag-ui) refuse what docs/security.md says
// they refuse, with the project's error body and status, and write
// nothing: no conversation is made, no prompt queued, nothing reverted.
func TestBadChatRequests(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	// A conversation bob takes no part in.
	f.want(f.do("POST", "/v1/conversations", f.admin, map[string]any{"id": "priv", "participants": []string{"alice"}}), 201, "")
	epoch := f.do("GET", "/v1/conversations/"+f.c, f.admin, nil).body["conversation"].(map[string]any)["epoch"].(string)

	msg := func(id, role, parts string) string {
		return fmt.Sprintf(`{"id":%q,"role":%q,"parts":%s}`, id, role, parts)
	}
	text := func(s string) string { return fmt.Sprintf(`[{"type":"text","text":%q}]`, s) }
	chat := func(id, last string, extra ...string) string {
		return fmt.Sprintf(`{"id":%q,"trigger":"submit-message","messages":[%s,%s]%s}`, id, msg("u0", "user", text("earlier")), last, strings.Join(extra, ""))
	}
	ok := msg("u1", "user", text("What is 6 x 7?"))
	long := msg("u1", "user", text(strings.Repeat("x", 4<<10+1)))
	// 17 MiB of earlier messages: over the 16 MiB a chat body may hold.
	huge := `{"id":"new-chat","messages":[` + strings.Repeat(msg("u0", "user", text(strings.Repeat("y", 1<<20)))+",", 17) + ok + `]}`

	run := func(thread, run, last string, extra ...string) string {
		return fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":{},"tools":[],"context":[],"forwardedProps":{}%s,"messages":[%s]}`, thread, run, strings.Join(extra, ""), last)
	}
	user := `{"id":"m1","role":"user","content":"What is 6 x 7?"}`
	// An answer's message as addToolApprovalResponse leaves it: its tool
	// part approval-responded.
	approved := func(id, yes string) string {
		return fmt.Sprintf(`[{"type":"tool-bash","toolCallId":"c1","state":"approval-responded","input":{},"approval":{"id":%q,"approved":%s}}]`, id, yes)
	}

	f.run(t, []badCase{
		{"a viewer asks", "POST", "/v1/chat", "viewer", chat("{c}", ok), nil, 403, "forbidden", "viewer"},
		{"a revoked token", "POST", "/v1/chat", "revoked", chat("{c}", ok), nil, 401, "unauthorized", ""},
		{"an outsider asks", "POST", "/v1/chat", "bob", chat("priv", ok), nil, 403, "forbidden", "does not take part"},
		{"an agent asks as another", "POST", "/v1/chat", "alice", chat("{c}", ok, `,"agentId":"bob"`), nil, 403, "forbidden", "belongs to agent alice"},
		{"an admin names no asker", "POST", "/v1/chat", "admin", chat("new-chat", ok), nil, 422, "invalid_value", "agentId is required"},
		{"malformed JSON", "POST", "/v1/chat", "alice", `{"id":"new-chat","messages":[`, nil, 400, "invalid_request", "truncated"},
		{"an unknown field", "POST", "/v1/chat", "alice", chat("new-chat", ok, `,"model":"gpt"`), nil, 400, "invalid_request", "unknown field \"model\""},
		{"messages not an array", "POST", "/v1/chat", "alice", `{"id":"new-chat","messages":{}}`, nil, 400, "invalid_request", "messages must be an array"},
		{"a message of the wrong shape", "POST", "/v1/chat", "alice", `{"id":"new-chat","messages":[{"id":1}]}`, nil, 400, "invalid_request", "messages[0]"},
		{"no chat id", "POST", "/v1/chat", "alice", `{"messages":[` + ok + `]}`, nil, 422, "invalid_value", "id (the chat's"},
		{"a chat id no path can name", "POST", "/v1/chat", "alice", chat("a/b", ok), nil, 422, "invalid_value", "id (the chat's"},
		{"a chat id too long", "POST", "/v1/chat", "alice", chat(strings.Repeat("c", 129), ok), nil, 422, "invalid_value", "id (the chat's"},
		{"no messages", "POST", "/v1/chat", "alice", `{"id":"new-chat","messages":[]}`, nil, 422, "invalid_value", "messages is empty"},
		{"the last message is not the user's", "POST", "/v1/chat", "alice", chat("new-chat", msg("a1", "assistant", text("hi"))), nil, 422, "invalid_value", "must be the user's"},
		{"a file part", "POST", "/v1/chat", "alice", chat("new-chat", msg("u1", "user", `[{"type":"file","mediaType":"image/png","url":"data:,"},{"type":"text","text":"this?"}]`)), nil, 422, "invalid_value", `"file"`},
		{"no text", "POST", "/v1/chat", "alice", chat("new-chat", msg("u1", "user", text(""))), nil, 422, "invalid_value", "no text"},
		{"a message id too long", "POST", "/v1/chat", "alice", chat("new-chat", msg(strings.Repeat("m", 129), "user", text("hi"))), nil, 422, "invalid_value", "last message's id"},
		{"an unknown trigger", "POST", "/v1/chat", "alice", chat("new-chat", ok, `,"trigger":"resume-stream"`), nil, 422, "invalid_value", "trigger"},
		{"a bad messageId", "POST", "/v1/chat", "alice", chat("new-chat", ok, `,"messageId":"a b"`), nil, 422, "invalid_value", "messageId"},
		{"a bad agent to ask", "POST", "/v1/chat", "alice", chat("new-chat", ok, `,"to":"b/ob"`), nil, 422, "invalid_value", "to"},
		{"a question over the text limit", "POST", "/v1/chat", "alice", chat("new-chat", long), nil, 413, "too_large", "limit is 4096"},
		{"a body over 16 MiB", "POST", "/v1/chat", "alice", huge, nil, 413, "too_large", "16777216"},
		{"a regenerate that removes others' messages", "POST", "/v1/chat", "alice", chat("{c}", msg("q1", "user", text("question")), `,"trigger":"regenerate-message","messageId":"a1"`), nil, 403, "forbidden", "revert"},

		{"an approval of a request the chat does not have", "POST", "/v1/chat", "alice", chat("{c}", msg("a1", "assistant", approved("nope", "true"))), nil, 404, "not_found", `approval "nope"`},
		{"an approval in a chat not made", "POST", "/v1/chat", "alice", chat("new-chat", msg("a1", "assistant", approved("req-1", "true"))), nil, 404, "not_found", "new-chat"},
		{"an approval not decided", "POST", "/v1/chat", "alice", chat("{c}", msg("a1", "assistant", approved("req-1", "null"))), nil, 422, "invalid_value", "no approval answered"},
		{"an approval with a bad id", "POST", "/v1/chat", "alice", chat("{c}", msg("a1", "assistant", approved("a b", "true"))), nil, 422, "invalid_value", "approval's id"},
		{"an approval sent as a regenerate", "POST", "/v1/chat", "alice", chat("{c}", msg("a1", "assistant", approved("req-1", "true")), `,"trigger":"regenerate-message"`), nil, 422, "invalid_value", "regenerate"},
		{"an outsider's approval", "POST", "/v1/chat", "bob", chat("priv", msg("a1", "assistant", approved("req-1", "true"))), nil, 403, "forbidden", "does not take part"},

		{"resume: a chat id no chat can have", "GET", "/v1/chat/" + strings.Repeat("c", 129) + "/stream", "alice", "", nil, 404, "not_found", "ccc"},
		{"resume: an outsider", "GET", "/v1/chat/priv/stream", "bob", "", nil, 403, "forbidden", "does not take part"},
		{"resume: no token", "GET", "/v1/chat/{c}/stream", "none", "", nil, 401, "unauthorized", ""},

		{"AG-UI: a viewer runs", "POST", "/v1/ag-ui", "viewer", run("{c}", "r-1", user), nil, 403, "forbidden", "viewer"},
		{"AG-UI: an outsider runs", "POST", "/v1/ag-ui", "bob", run("priv", "r-1", user), nil, 403, "forbidden", "does not take part"},
		{"AG-UI: an unknown field", "POST", "/v1/ag-ui", "alice", run("new-thread", "r-1", user, `,"model":"x"`), nil, 400, "invalid_request", "unknown field"},
		{"AG-UI: no runId", "POST", "/v1/ag-ui", "alice", run("new-thread", "", user), nil, 422, "invalid_value", "runId"},
		{"AG-UI: a bad threadId", "POST", "/v1/ag-ui", "alice", run("..", "r-1", user), nil, 422, "invalid_value", "threadId"},
		{"AG-UI: the last message is not the user's", "POST", "/v1/ag-ui", "alice", run("new-thread", "r-1", `{"id":"m1","role":"assistant","content":"hi"}`), nil, 422, "invalid_value", "must be the user's"},
		{"AG-UI: an image", "POST", "/v1/ag-ui", "alice", run("new-thread", "r-1", `{"id":"m1","role":"user","content":[{"type":"image","source":{}}]}`), nil, 422, "invalid_value", `"image"`},
		{"AG-UI: content of the wrong type", "POST", "/v1/ag-ui", "alice", run("new-thread", "r-1", `{"id":"m1","role":"user","content":7}`), nil, 400, "invalid_request", "content"},
		{"AG-UI: forwardedProps.to not a string", "POST", "/v1/ag-ui", "alice", strings.Replace(run("new-thread", "r-1", user), `"forwardedProps":{}`, `"forwardedProps":{"to":7}`, 1), nil, 400, "invalid_request", "forwardedProps"},
		{"AG-UI: a bad agent to ask", "POST", "/v1/ag-ui", "alice", strings.Replace(run("new-thread", "r-1", user), `"forwardedProps":{}`, `"forwardedProps":{"to":"a b"}`, 1), nil, 422, "invalid_value", "forwardedProps.to"},
		{"AG-UI: a question over the text limit", "POST", "/v1/ag-ui", "alice", run("new-thread", "r-1", `{"id":"m1","role":"user","content":"`+strings.Repeat("x", 4<<10+1)+`"}`), nil, 413, "too_large", "limit"},
		{"AG-UI: resume not an array", "POST", "/v1/ag-ui", "alice", run("{c}", "r-2", user, `,"resume":{}`), nil, 400, "invalid_request", "resume must be an array"},
		{"AG-UI: a resume entry of no status", "POST", "/v1/ag-ui", "alice", run("{c}", "r-2", user, `,"resume":[{"interruptId":"req-1","payload":{"approved":true}}]`), nil, 422, "invalid_value", "status"},
		{"AG-UI: a resolved entry without a payload", "POST", "/v1/ag-ui", "alice", run("{c}", "r-2", user, `,"resume":[{"interruptId":"req-1","status":"resolved"}]`), nil, 422, "invalid_value", "without a payload"},
		{"AG-UI: an interrupt answered twice", "POST", "/v1/ag-ui", "alice", run("{c}", "r-2", user, `,"resume":[{"interruptId":"req-1","status":"cancelled"},{"interruptId":"req-1","status":"cancelled"}]`), nil, 422, "invalid_value", "twice"},
		{"AG-UI: an interrupt the thread does not have", "POST", "/v1/ag-ui", "alice", run("{c}", "r-2", user, `,"resume":[{"interruptId":"nope","status":"resolved","payload":{"approved":true}}]`), nil, 404, "not_found", "interrupt nope"},
		{"AG-UI: an outsider resumes", "POST", "/v1/ag-ui", "bob", run("priv", "r-2", user, `,"resume":[{"interruptId":"req-1","status":"cancelled"}]`), nil, 403, "forbidden", "does not take part"},
		{"AG-UI: a malformed Last-Event-ID", "POST", "/v1/ag-ui", "alice", run("{c}", "r-1", user), []string{"Last-Event-ID", epoch + ":05"}, 400, "invalid_request", "Last-Event-ID"},
		{"AG-UI: a Last-Event-ID of four parts", "POST", "/v1/ag-ui", "alice", run("{c}", "r-1", user), []string{"Last-Event-ID", epoch + ":5:1:2"}, 400, "invalid_request", "Last-Event-ID"},
		{"AG-UI: resuming a run never asked", "POST", "/v1/ag-ui", "alice", run("{c}", "never", user), []string{"Last-Event-ID", epoch + ":5"}, 404, "not_found", "never"},
		{"AG-UI: resuming in a thread that does not exist", "POST", "/v1/ag-ui", "alice", run("new-thread", "r-1", user), []string{"Last-Event-ID", epoch + ":5"}, 404, "not_found", "new-thread"},
	})
}

// TestChatInOpenMode: on a server running open, the chat endpoints refuse
// a body a web page could send anywhere (text/plain) and another origin,
// like every endpoint, and write nothing.
func TestChatInOpenMode(t *testing.T) {
	t.Parallel()
	f := openFixture(t)
	body := `{"id":"new-chat","agentId":"you","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`
	agui := `{"threadId":"new-thread","runId":"r-1","messages":[{"id":"m1","role":"user","content":"hi"}],"forwardedProps":{"agentId":"you"}}`
	f.run(t, []badCase{
		{"text/plain", "POST", "/v1/chat", "none", body, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", "application/json"},
		{"another origin", "POST", "/v1/chat", "none", body, []string{"Origin", "http://evil.example"}, 403, "forbidden", "Origin"},
		{"another origin resuming", "GET", "/v1/chat/{c}/stream", "none", "", []string{"Origin", "http://evil.example"}, 403, "forbidden", "Origin"},
		{"AG-UI text/plain", "POST", "/v1/ag-ui", "none", agui, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", "application/json"},
		{"AG-UI cross-site", "POST", "/v1/ag-ui", "none", agui, []string{"Sec-Fetch-Site", "cross-site"}, 403, "forbidden", "cross-site"},
	})
}
