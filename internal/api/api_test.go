package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// bundle is a real server over loopback: SQLite file, engine, API, and
// tokens for an admin, two agents and a viewer.
type bundle struct {
	t                         testing.TB
	url                       string
	eng                       *engine.Engine
	db                        *sqlite.DB
	admin, alice, bob, viewer string
	ctx                       context.Context
}

func setup(t testing.TB, eopts engine.Options, aopts api.Options) *bundle {
	t.Helper()
	b, _ := setupServer(t, eopts, aopts)
	return b
}

// setupServer is setup that also returns the API server.
func setupServer(t testing.TB, eopts engine.Options, aopts api.Options) (*bundle, *api.Server) {
	t.Helper()
	return setupRunners(t, eopts, runners.Options{Logger: eopts.Logger}, aopts)
}

// setupRunners is setupServer with the runners' options too.
func setupRunners(t testing.TB, eopts engine.Options, dopts runners.Options, aopts api.Options) (*bundle, *api.Server) {
	t.Helper()
	return setupWrapped(t, nil, nil, eopts, dopts, aopts)
}

// setupWrapped is setupRunners over the store wrap makes (the store
// itself if wrap is nil) of the SQLite file, or of the store open opens
// (if not nil; the bundle's db is then nil).
func setupWrapped(t testing.TB, open func(context.Context) (store.Store, error), wrap func(store.Store) store.Store, eopts engine.Options, dopts runners.Options, aopts api.Options) (*bundle, *api.Server) {
	t.Helper()
	// The bound on the bundle's requests: one that hangs fails the test.
	// The race detector slows the server down several times.
	bound := 30 * time.Second
	if raceEnabled {
		bound = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	var st store.Store
	var file *sqlite.DB
	var err error
	if open != nil {
		st, err = open(ctx)
	} else {
		file, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"), sqlite.Options{})
		st = file
	}
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		st = wrap(st)
	}
	srv, eng, handler := serveStore(t, st, eopts, dopts, aopts)
	b := &bundle{t: t, url: srv.URL, eng: eng, db: file, ctx: ctx}
	mk := func(kind parley.TokenKind, agent string) string {
		s, _, err := eng.CreateToken(ctx, kind, agent, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b.admin, b.alice, b.bob, b.viewer = mk(parley.TokenAdmin, ""), mk(parley.TokenAgent, "alice"), mk(parley.TokenAgent, "bob"), mk(parley.TokenViewer, "")
	return b, handler
}

// agentToken makes a token of agent and returns its secret.
func (b *bundle) agentToken(agent string) string {
	b.t.Helper()
	s, _, err := b.eng.CreateToken(b.ctx, parley.TokenAgent, agent, "")
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// serveStore serves the API over an engine on db, over loopback, until the
// test ends (and closes db then).
func serveStore(t testing.TB, db store.Store, eopts engine.Options, dopts runners.Options, aopts api.Options) (*httptest.Server, *engine.Engine, *api.Server) {
	t.Helper()
	eng := engine.New(db, eopts)
	rn := runners.New(eng, db, dopts)
	handler := api.New(eng, rn, reads.New(db, eng), aopts)
	srv := httptest.NewServer(handler)
	t.Cleanup(func() { srv.Close(); rn.Close(); eng.Close(); db.Close() })
	return srv, eng, handler
}

// response is an answer with its decoded JSON body.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r response) code() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func (b *bundle) do(method, path, token string, body any, header ...string) response {
	b.t.Helper()
	resp, err := http.DefaultClient.Do(b.request(method, path, token, body, header...))
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// request makes a request as token: body is sent as it is (a string or
// bytes) or as JSON; header holds name, value pairs ("Host" sets the
// request's Host).
func (b *bundle) request(method, path, token string, body any, header ...string) *http.Request {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		data, _ := json.Marshal(v)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.url+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json") // as the Go client sends
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" { // sent as the request's Host, not a header
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

func (b *bundle) want(r response, status int, code string) {
	b.t.Helper()
	if r.status != status || r.code() != code {
		b.t.Fatalf("got %d %q, want %d %q: %s", r.status, r.code(), status, code, r.raw)
	}
}

// conversation makes a conversation of participants in which the agents of
// the test tokens (alice, bob) that are not participants are members, so
// that they may read and write it without the turn policy naming them.
func (b *bundle) conversation(participants ...string) string {
	b.t.Helper()
	members := []string{}
	for _, a := range []string{"alice", "bob"} {
		if !slices.Contains(participants, a) {
			members = append(members, a)
		}
	}
	r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"title": "t", "participants": participants, "members": members})
	b.want(r, 201, "")
	return r.body["conversation"].(map[string]any)["id"].(string)
}

// log returns the conversation's whole event log as the API lists it, to
// check that a refused write left nothing behind.
func (b *bundle) log(id string) string {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id+"/events?limit=1000", b.viewer, nil)
	b.want(r, 200, "")
	return string(r.raw)
}

// lastSeq reads the conversation's head.
func (b *bundle) lastSeq(id string) float64 {
	b.t.Helper()
	r := b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	b.want(r, 200, "")
	return r.body["head"].(map[string]any)["lastSeq"].(float64)
}

func TestConversationsCreateGetList(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	r := b.do("GET", "/v1/conversations/"+id, b.viewer, nil)
	b.want(r, 200, "")
	if g := r.body["guidance"].(map[string]any); g["nextAgentId"] != "alice" || g["turn"] != 1.0 || g["kind"] != "start_turn" {
		t.Fatalf("guidance = %v", g)
	}
	b.want(b.do("GET", "/v1/conversations/nope", b.viewer, nil), 404, "not_found")
	b.want(b.do("POST", "/v1/conversations", b.viewer, map[string]any{}), 403, "forbidden")
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"turnPolicy": "chaos"}), 422, "invalid_value")
	b.want(b.do("POST", "/v1/conversations", b.admin, map[string]any{"id": id}), 409, "busy")
	b.conversation()
	r = b.do("GET", "/v1/conversations?limit=1", b.viewer, nil)
	b.want(r, 200, "")
	if len(r.body["conversations"].([]any)) != 1 || r.body["nextCursor"] == nil {
		t.Fatalf("page = %s", r.raw)
	}
	r = b.do("GET", "/v1/conversations?limit=1&cursor="+r.body["nextCursor"].(string), b.viewer, nil)
	if len(r.body["conversations"].([]any)) != 1 {
		t.Fatalf("second page = %s", r.raw)
	}
	b.want(b.do("GET", "/v1/conversations?limit=0", b.viewer, nil), 422, "invalid_value")
	b.want(b.do("GET", "/v1/conversations?limit=x", b.viewer, nil), 400, "invalid_request")
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	id := b.conversation("alice", "bob")
	path := "/v1/conversations/" + id + "/messages"
	before := b.log(id)
	b.want(b.do("POST", path, "", map[string]any{"content": "x"}), 401, "unauthorized")
	b.want(b.do("POST", path, "pk_not-a-real-token", map[string]any{"content": "x"}), 401, "unauthorized")
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "x"}, "Authorization", "Basic abc"), 401, "unauthorized")
	b.want(b.do("POST", path, b.viewer, map[string]any{"content": "x"}), 403, "forbidden")
	b.want(b.do("POST", path, b.alice, map[string]any{"agentId": "bob", "content": "x"}), 403, "forbidden")
	b.want(b.do("POST", path, b.admin, map[string]any{"content": "x"}), 422, "invalid_value")
	b.want(b.do("POST", path, b.alice, map[string]any{"content": "x"}, "Authorization", "Bearer "), 401, "unauthorized")
	b.want(b.do("POST", "/v1/conversations/"+id+"/turns/claim", b.viewer, map[string]any{}), 403, "forbidden")
	b.want(b.do("POST", "/v1/conversations/"+id+"/events", b.alice, map[string]any{"type": "trace", "agentId": "bob"}), 403, "forbidden")
	if after := b.log(id); after != before {
		t.Fatalf("refused writes wrote something:\n%s\n%s", before, after)
	}
	r := b.do("POST", path, b.alice, map[string]any{"content": "as myself"})
	b.want(r, 201, "")
	if r.body["message"].(map[string]any)["agentId"] != "alice" {
		t.Fatalf("agent token did not bind the agent: %s", r.raw)
	}
	b.want(b.do("POST", path, b.admin, map[string]any{"agentId": "alice", "content": "admin as alice"}), 201, "")
	// Revoked tokens stop working; token management is admin-only.
	b.want(b.do("GET", "/v1/tokens", b.alice, nil), 403, "forbidden")
	r = b.do("POST", "/v1/tokens", b.admin, map[string]any{"kind": "agent", "agentId": "carol"})
	b.want(r, 201, "")
	secret, tid := r.body["token"].(string), r.body["id"].(string)
	b.want(b.do("GET", "/v1/conversations", secret, nil), 200, "") // carol takes part in none: an empty list
	r = b.do("DELETE", "/v1/tokens/"+tid, b.admin, nil)
	if r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	b.want(b.do("GET", "/v1/conversations/"+id, secret, nil), 401, "unauthorized")
	b.want(b.do("DELETE", "/v1/tokens/nope", b.admin, nil), 404, "not_found")
	r = b.do("GET", "/v1/tokens", b.admin, nil)
	if bytes.Contains(r.raw, []byte(secret)) || bytes.Contains(r.raw, []byte(engine.HashToken(secret))) {
		t.Fatal("token list leaks a secret or its hash")
	}
}

func TestOpenServerActsAsAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Open: true})
	r := b.do("POST", "/v1/conversations", "", map[string]any{})
	b.want(r, 201, "")
	id := r.body["conversation"].(map[string]any)["id"].(string)
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", "", map[string]any{"agentId": "x", "content": "hi"}), 201, "")
	b.want(b.do("POST", "/v1/conversations/"+id+"/messages", "", map[string]any{"content": "who?"}), 422, "invalid_value")
	b.want(b.do("GET", "/v1/conversations/"+id, "pk_bogus", nil), 401, "unauthorized")
	// The first token made through the server ends open mode.
	r = b.do("POST", "/v1/tokens", "", map[string]any{"kind": "admin"})
	b.want(r, 201, "")
	b.want(b.do("GET", "/v1/conversations/"+id, "", nil), 401, "unauthorized")
	b.want(b.do("GET", "/v1/conversations/"+id, r.body["token"].(string), nil), 200, "")
}

func TestBadBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{MaxBodyBytes: 4096})
	id := b.conversation("alice", "bob")
	path := "/v1/conversations/" + id + "/messages"
	before := b.log(id)
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		says   string // the message must say this (where, or which field)
	}{
		{"empty", ``, 400, "invalid_request", "required"},
		{"white space", " \n ", 400, "invalid_request", "required"},
		{"null", `null`, 400, "invalid_request", "object"},
		{"a string", `"hi"`, 400, "invalid_request", "object"},
		{"malformed", `{"content": }`, 400, "invalid_request", "byte 13"},
		{"truncated", `{"content": "abc`, 400, "invalid_request", "truncated"},
		{"wrong type", `{"content": 42}`, 400, "invalid_request", "content must be a string"},
		{"wrong nested type", `{"content": "x", "precondition": {"expectTurn": "1"}}`, 400, "invalid_request", "precondition.expectTurn"},
		{"number out of range", `{"content": "x", "precondition": {"expectTurn": 1e30}}`, 400, "invalid_request", "precondition.expectTurn"},
		{"unknown field", `{"content": "x", "replyToMessageId": "m"}`, 400, "invalid_request", "replyToMessageId"},
		{"trailing data", `{"content": "x"} {}`, 400, "invalid_request", "nothing after"},
		{"not an object", `[1,2]`, 400, "invalid_request", "object"},
		{"content and parts", `{"content": "x", "parts": [{"type":"text","text":"y"}]}`, 400, "invalid_request", "not both"},
		{"too large", `{"content": "` + strings.Repeat("x", 5000) + `"}`, 413, "too_large", "4096"},
		{"too large after the object", `{"content": "x"}` + strings.Repeat(" ", 5000), 413, "too_large", ""},
		{"unknown part", `{"parts": [{"type": "hologram"}]}`, 422, "invalid_value", "hologram"},
		{"unknown part field", `{"parts": [{"type": "text", "txt": "x"}]}`, 400, "invalid_request", "txt"},
		{"bad role", `{"role": "oracle", "content": "x"}`, 422, "invalid_value", "oracle"},
		{"bad id", `{"id": "has space", "content": "x"}`, 422, "invalid_value", ""},
		{"id too long", `{"id": "` + strings.Repeat("a", 129) + `", "content": "x"}`, 422, "invalid_value", ""},
		{"bad finality", `{"finality": "forever", "content": "x"}`, 422, "invalid_value", "forever"},
		{"bad client request id", `{"content": "x", "clientRequestId": "a b"}`, 422, "invalid_value", "clientRequestId"},
		{"self reply", `{"id": "m1", "replyTo": "m1", "content": "x"}`, 422, "invalid_thread", "itself"},
		{"unknown parent", `{"replyTo": "nobody", "content": "x"}`, 422, "invalid_thread", "nobody"},
	}
	for _, c := range cases {
		r := b.do("POST", path, b.alice, c.body)
		msg, _ := r.body["error"].(map[string]any)["message"].(string)
		if r.status != c.status || r.code() != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s: got %d %q, want %d %q saying %q: %s", c.name, r.status, r.code(), c.status, c.code, c.says, r.raw)
		}
	}
	// Every other body decoder refuses the same way.
	b.want(b.do("POST", "/v1/conversations", b.admin, `{"title": "`+strings.Repeat("x", 5000)+`"}`), 413, "too_large")
	b.want(b.do("POST", "/v1/conversations", b.admin, `{"participants": "alice"}`), 400, "invalid_request")
	b.want(b.do("POST", "/v1/conversations/"+id+"/turns/claim", b.alice, ``), 400, "invalid_request")
	b.want(b.do("POST", "/v1/conversations/"+id+"/turns/claim", b.alice, `{"ttl": 5}`), 400, "invalid_request")
	b.want(b.do("POST", "/v1/conversations/"+id+"/turns/reset", b.alice, `{"claim": "yes"}`), 400, "invalid_request")
	b.want(b.do("POST", "/v1/conversations/"+id+"/turns/abort", b.alice, `{"reason": `), 400, "invalid_request")
	b.want(b.do("POST", "/v1/conversations/"+id+"/delegations", b.alice, `{"to": ["x"]}`), 400, "invalid_request")
	b.want(b.do("POST", "/v1/conversations/"+id+"/events", b.alice, `{"type": "trace", "payload": {}} x`), 400, "invalid_request")
	b.want(b.do("POST", "/v1/tokens", b.admin, `{"kind": "agent", "agent": "x"}`), 400, "invalid_request")
	if after := b.log(id); after != before {
		t.Fatalf("a refused request wrote something:\n%s\n%s", before, after)
	}
	for _, p := range []string{"/events?after=x", "/messages?limit=abc", "/messages/x/replies?after=1.5"} {
		b.want(b.do("GET", "/v1/conversations/"+id+p, b.viewer, nil), 400, "invalid_request")
	}
	for _, p := range []string{"/messages?after=-1", "/messages?limit=5000", "/events?limit=0"} {
		b.want(b.do("GET", "/v1/conversations/"+id+p, b.viewer, nil), 422, "invalid_value")
	}
	b.want(b.do("GET", "/v1/conversations?cursor=garbage!", b.viewer, nil), 400, "invalid_request")
	r := b.do("PUT", "/v1/conversations/"+id, b.viewer, nil)
	b.want(r, 405, "method_not_allowed")
	if r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("405 content type %q", r.header.Get("Content-Type"))
	}
	b.want(b.do("DELETE", "/v1/conversations/"+id+"/messages", b.viewer, nil), 405, "method_not_allowed")
	b.want(b.do("GET", "/v2/nothing", b.viewer, nil), 404, "not_found")
	b.want(b.do("GET", "/v1/conversations/"+id+"/nothing", b.viewer, nil), 404, "not_found")
}

func TestReplyAcrossConversationsIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	one, two := b.conversation(), b.conversation()
	r := b.do("POST", "/v1/conversations/"+one+"/messages", b.alice, map[string]any{"id": "q1", "role": "user", "content": "q", "finality": "turn"})
	b.want(r, 201, "")
	b.want(b.do("POST", "/v1/conversations/"+two+"/messages", b.bob, map[string]any{"replyTo": "q1", "content": "a"}), 422, "invalid_thread")
	if b.lastSeq(two) != 1 {
		t.Fatal("refused reply was written")
	}
	b.want(b.do("POST", "/v1/conversations/nope/messages", b.bob, map[string]any{"content": "a"}), 404, "not_found")
}

// TestListConversationsByTitle: ?title= lists the conversations whose
// title contains it, case aside, within what the token may read; a filter
// longer than 200 bytes is 422.
func TestListConversationsByTitle(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{})
	mk := func(title string, participants ...string) string {
		r := b.do("POST", "/v1/conversations", b.admin, map[string]any{"title": title, "participants": participants})
		b.want(r, 201, "")
		return r.body["conversation"].(map[string]any)["id"].(string)
	}
	alices := mk("Quarterly Plan", "alice")
	bobs := mk("the plan of bob", "bob")
	mk("lunch", "alice")
	titles := func(token, query string) []string {
		r := b.do("GET", "/v1/conversations?title="+url.QueryEscape(query), token, nil)
		b.want(r, 200, "")
		var ids []string
		for _, v := range r.body["conversations"].([]any) {
			ids = append(ids, v.(map[string]any)["conversation"].(map[string]any)["id"].(string))
		}
		return ids
	}
	if got := titles(b.viewer, "PLAN"); !slices.Equal(got, []string{bobs, alices}) {
		t.Errorf("a viewer's PLAN: %v, want %v", got, []string{bobs, alices})
	}
	if got := titles(b.alice, "plan"); !slices.Equal(got, []string{alices}) {
		t.Errorf("alice's plan: %v, want only hers, %v", got, alices)
	}
	r := b.do("GET", "/v1/conversations?title="+strings.Repeat("x", 201), b.viewer, nil)
	b.want(r, 422, "invalid_value")
}
