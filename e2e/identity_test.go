package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/client"
)

// createToken runs `parley token create` on a database file and returns
// the secret and the token's id.
func createToken(t *testing.T, db string, args ...string) (secret, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"token", "create", "-db", db}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	m := regexp.MustCompile(`created \S+ token (\S+);`).FindStringSubmatch(stderr.String())
	if err != nil || m == nil {
		t.Fatalf("parley token create %v: %v\n%s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), m[1]
}

// status sends a GET with a token ("" for none) and returns the status.
func status(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// openConns opens a runner, a WebSocket stream and an SSE stream of a
// conversation with a token ("" on an open server); ended reports, within
// the bound, how each ended: "ok" when with an unauthorized error frame
// (and close code 4401 on the WebSockets).
func openConns(t *testing.T, ctx context.Context, base, id, token string) (ended func(within time.Duration) map[string]string) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ws := "ws" + strings.TrimPrefix(base, "http") + "/v1/conversations/" + id
	dial := func(path string) *websocket.Conn {
		c, _, err := websocket.Dial(ctx, ws+path, &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	runner, stream := dial("/runner?agentId=carol"), dial("/ws")
	if _, _, err := stream.Read(ctx); err != nil { // init
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/conversations/"+id+"/stream", nil)
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("SSE: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sse := bufio.NewReader(resp.Body)
	if _, err := sse.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return func(within time.Duration) map[string]string {
		rctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		out := map[string]string{}
		for name, c := range map[string]*websocket.Conn{"runner": runner, "ws": stream} {
			var last []byte
			for {
				_, data, err := c.Read(rctx)
				if err != nil {
					out[name] = "ended by " + err.Error()
					if websocket.CloseStatus(err) == 4401 && unauthorized(last) {
						out[name] = "ok"
					}
					break
				}
				last = data
			}
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			for {
				l, err := sse.ReadString('\n')
				if err != nil {
					return
				}
				lines <- l
			}
		}()
		var last string
		for {
			select {
			case l, ok := <-lines:
				if ok {
					if strings.HasPrefix(l, "data: ") {
						last = l[6:]
					}
					continue
				}
				out["sse"] = "ended after " + last
				if unauthorized([]byte(last)) {
					out["sse"] = "ok"
				}
			case <-rctx.Done():
				out["sse"] = "still open"
				resp.Body.Close()
			}
			return out
		}
	}
}

// followed makes a conversation with carol in it (with the creator's
// token) and opens the connections of openConns to it with token.
func followed(t *testing.T, ctx context.Context, base, creator, token string) (ended func(within time.Duration) map[string]string) {
	t.Helper()
	v, err := client.New(base, creator).CreateConversation(ctx, client.NewConversation{Participants: []string{"carol"}})
	if err != nil {
		t.Fatal(err)
	}
	return openConns(t, ctx, base, v.Conversation.ID, token)
}

func unauthorized(frame []byte) bool {
	var f struct {
		Type  string
		Error struct{ Code string }
	}
	return json.Unmarshal(frame, &f) == nil && f.Type == "error" && f.Error.Code == "unauthorized"
}

func allOK(m map[string]string) bool {
	return m["runner"] == "ok" && m["ws"] == "ok" && m["sse"] == "ok"
}

// TestRevokingOnTheFileEndsConnections: `parley token revoke` on the
// database file of a running server ends that token's runner, WebSocket
// and SSE connections within a few seconds (the server reads the tokens
// again every 2 s), each with an unauthorized error frame.
func TestRevokingOnTheFileEndsConnections(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	admin, _ := createToken(t, db, "-kind", "admin")
	carol, carolID := createToken(t, db, "-kind", "agent", "-agent", "carol")
	srv := startServer(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ended := followed(t, ctx, srv.url, admin, carol)
	runParley(t, "token", "revoke", "-db", db, carolID)
	if got := ended(5 * time.Second); !allOK(got) {
		t.Fatalf("after the revocation on the file: %v", got)
	}
	if s := status(t, srv.url+"/v1/conversations", carol); s != 401 {
		t.Fatalf("the revoked token: %d, want 401", s)
	}
}

// TestTokenOnTheFileEndsOpenMode: a token made on the file of a server
// running open ends open mode within seconds (the server reads the tokens
// again every 2 s), and the connections it let in without a token.
func TestTokenOnTheFileEndsOpenMode(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startServer(t, db)
	ended := followed(t, ctx, srv.url, "", "")
	admin, _ := createToken(t, db, "-kind", "admin")
	if got := ended(5 * time.Second); !allOK(got) {
		t.Fatalf("open connections after a token was made on the file: %v", got)
	}
	if s := status(t, srv.url+"/v1/conversations", ""); s != 401 {
		t.Fatalf("no token after a token was made: %d, want 401", s)
	}
	if s := status(t, srv.url+"/v1/conversations", admin); s != 200 {
		t.Fatalf("the new admin token: %d", s)
	}
}

// TestRevokedStoreStaysClosed: a store whose tokens are all revoked does
// not start open again: every request is refused (and the log says why)
// until an admin token is made on its file, which works at once. -reopen
// is the explicit way back to open mode, refused while a token is live.
func TestRevokedStoreStaysClosed(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "parley.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, adminID := createToken(t, db, "-kind", "admin")
	runParley(t, "token", "revoke", "-db", db, adminID)
	srv := startServer(t, db)
	if s := status(t, srv.url+"/v1/conversations", ""); s != 401 {
		t.Fatalf("a store whose tokens are all revoked started open: %d, want 401", s)
	}
	if !strings.Contains(srv.log(), "every token of this store is revoked") {
		t.Fatalf("the server did not say why it refuses everything:\n%s", srv.log())
	}
	again, againID := createToken(t, db, "-kind", "admin")
	if s := status(t, srv.url+"/v1/conversations", again); s != 200 {
		t.Fatalf("an admin token made on the file of the running server: %d", s)
	}
	srv.kill()

	refusesToStart(t, ctx, db, "127.0.0.1:0", "not revoked", "-reopen")
	runParley(t, "token", "revoke", "-db", db, againID)
	srv = startServer(t, db, "-reopen")
	if s := status(t, srv.url+"/v1/conversations", ""); s != 200 {
		t.Fatalf("-reopen: %d, want 200", s)
	}
}
