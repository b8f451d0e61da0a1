package api_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/postgres"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/sqlite"
	"github.com/parleyhq/parley/internal/store"
)

// getBackup starts GET /v1/admin/backup and returns its response, unread.
func getBackup(t *testing.T, b *bundle, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.url+"/v1/admin/backup", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestAdminBackup: an admin downloads a consistent copy of the store, a
// whole database with the conversations in it; agents and viewers are
// refused; while one backup is being sent (its client reads slowly) another
// is 409 busy, and once it ends the next is served.
func TestAdminBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, engine.Options{}, api.Options{Spool: spool.New(dir, spool.Limits{})})
	v, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Title: "kept", Participants: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	// About 40 MiB, more than loopback's socket buffers hold: a client that
	// does not read holds the backup being sent.
	big := strings.Repeat("x", 1<<20)
	for seq := int64(2); seq < 42; seq++ {
		data, _ := json.Marshal(map[string]string{"payload": big})
		e := parley.Event{ConversationID: id, Seq: seq, Type: parley.EventTrace, Turn: 0, Finality: parley.FinalityNone, Time: parley.NewTime(time.Now()), Data: data}
		if err := b.db.Append(b.ctx, store.AppendParams{ConversationID: id, ExpectSeq: seq - 1, Events: []parley.Event{e}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tok := range []string{b.alice, b.viewer} {
		if r := b.do("GET", "/v1/admin/backup", tok, nil); r.status != http.StatusForbidden || r.body["error"].(map[string]any)["code"] != parley.EFORBIDDEN {
			t.Fatalf("a non-admin's backup: %d %s", r.status, r.raw)
		}
	}

	slow := getBackup(t, b, b.admin)
	if slow.StatusCode != http.StatusOK || slow.Header.Get("Content-Type") != api.BackupContentType ||
		!strings.HasPrefix(slow.Header.Get("Content-Disposition"), `attachment; filename="parley-`) || slow.ContentLength < 40<<20 {
		t.Fatalf("backup: %d %v", slow.StatusCode, slow.Header)
	}
	r := b.do("GET", "/v1/admin/backup", b.admin, nil)
	if r.status != http.StatusConflict || r.body["error"].(map[string]any)["code"] != parley.EBUSY {
		t.Fatalf("a second backup while one is sent: %d %s", r.status, r.raw)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(f, slow.Body); err != nil || n != slow.ContentLength {
		t.Fatalf("read %d of %d bytes: %v", n, slow.ContentLength, err)
	}
	f.Close()
	if _, err := sqlite.CheckBackup(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	copied, err := sqlite.Open(context.Background(), file, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	if h, err := copied.Head(b.ctx, id); err != nil || h.Seq != 41 {
		t.Fatalf("the backup's conversation is at %d, err %v", h.Seq, err)
	}
	// The next is served, and no copy is left behind on the server.
	var next *http.Response
	for range 50 {
		if next = getBackup(t, b, b.admin); next.StatusCode == http.StatusOK {
			break
		}
		next.Body.Close()
		time.Sleep(20 * time.Millisecond) // the first handler may still be returning
	}
	if n, err := io.Copy(io.Discard, next.Body); next.StatusCode != http.StatusOK || err != nil || n != next.ContentLength {
		t.Fatalf("the next backup: %d, %d bytes, err %v", next.StatusCode, n, err)
	}
	time.Sleep(50 * time.Millisecond)
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestBackupIsAConsistentDatabase: what the endpoint sends is an SQLite
// database that opens as a store, not a file copied while written.
func TestBackupIsAConsistentDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Options{}, api.Options{Spool: spool.New(t.TempDir(), spool.Limits{})})
	for i := range 5 {
		if _, err := b.eng.CreateConversation(b.ctx, parley.Conversation{Title: fmt.Sprint(i), Participants: []string{"alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	resp := getBackup(t, b, b.admin)
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d, err %v", resp.StatusCode, err)
	}
	file := filepath.Join(t.TempDir(), "b.db")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var mode string
	if err := db.QueryRow(`SELECT count(*) FROM conversations`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d conversations, err %v", n, err)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("the backup's journal mode is %q (err %v): want one file", mode, err)
	}
}

// TestBackupOnPostgres: a server on PostgreSQL has no backup endpoint of
// its own, and says what to use instead.
func TestBackupOnPostgres(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	srv, _, _ := serveStore(t, db, engine.Options{}, runners.Options{}, api.Options{Open: true})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/admin/backup", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "pg_dump") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
