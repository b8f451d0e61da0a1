package api_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// TestChatStreamsAreGuarded: the chat streams are connections of their
// token like every stream: revoking the token ends them (an error chunk
// saying so, then [DONE]; AG-UI's RUN_ERROR); past -max-token-connections
// a request is 429 before anything is written; and a chat or thread made
// on first use counts toward -create-rate (429, nothing made), while
// asking in a conversation that exists does not.
func TestChatStreamsAreGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Guards: api.Guards{MaxConnsPerToken: 2, CreateRate: 0.001, CreateBurst: 1}})
	secret, tok, err := b.tokens.CreateToken(b.ctx, parley.TokenAgent, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	chat := events(t, b.postJSON("/v1/chat", secret, chatBody("carols", "u1", "one", "to", "bob")))
	agui := events(t, b.postJSON("/v1/ag-ui", secret, runInput("carols", "run-1", "two", nil)))

	before := b.snapshot()
	r := b.postJSON("/v1/chat", secret, chatBody("carols", "u3", "three"))
	if r.StatusCode != 429 {
		t.Fatalf("a third stream of the token: %d", r.StatusCode)
	}
	if r := b.send("GET", "/v1/chat/carols/stream", secret, nil); r.StatusCode != 429 {
		t.Fatalf("a third stream of the token, resuming: %d", r.StatusCode)
	}
	if after := b.snapshot(); after != before {
		t.Fatalf("a refused stream wrote:\nbefore %s\nafter  %s", before, after)
	}

	b.want(b.do("DELETE", "/v1/tokens/"+tok.ID, b.admin, nil), 204, "")
	if got := chunkTypes(chat.all(), "errorText"); !strings.HasSuffix(got, "error errorText=\"the token of this connection was revoked\"\n[DONE]") {
		t.Fatalf("the chat stream of a revoked token:\n%s", got)
	}
	if got := chunkTypes(agui.all(), "message"); got != "RUN_STARTED\nRUN_ERROR message=\"the token of this connection was revoked\"" {
		t.Fatalf("the AG-UI stream of a revoked token:\n%s", got)
	}

	// Alice's first new chat is made; her next new chat and thread are not.
	events(t, b.postJSON("/v1/chat", b.alice, chatBody("alices", "u1", "one"))).resp.Body.Close()
	before = b.snapshot()
	for _, r := range []*response{
		asResponse(b.postJSON("/v1/chat", b.alice, chatBody("alices-2", "u1", "two"))),
		asResponse(b.postJSON("/v1/ag-ui", b.alice, runInput("alices-3", "run-1", "three", nil))),
	} {
		b.wantLimited(*r)
	}
	if after := b.snapshot(); after != before {
		t.Fatalf("a refused creation wrote:\nbefore %s\nafter  %s", before, after)
	}
	events(t, b.postJSON("/v1/chat", b.alice, chatBody("alices", "u2", "again"))).resp.Body.Close()
}
