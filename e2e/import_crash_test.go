package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/postgres/pgtest"
	"github.com/parleyhq/parley/internal/transfer"
	_ "modernc.org/sqlite" // reads the server's SQLite file beside it
)

// crashTraces is how many trace events the big export holds: with the
// conversation's own events, about 100k.
const crashTraces = 100_000

// importBackend is where a crash test's server stores, and a way to count
// the rows of the imported conversation straight from that store.
type importBackend struct {
	db   string
	args []string
	// count returns the rows of table whose conversation_id is id.
	count func(table, id string) int64
	// sweepWait is how long a dead import's rows may stay after the
	// restart: none on SQLite (the restart removes them), on PostgreSQL
	// until its lease ends and the next sweep.
	sweepWait time.Duration
}

// TestKillDuringImport kills the server with SIGKILL in the middle of a
// `parley import` of a 100k-event export, once some batches are durable,
// restarts it on the same store, and checks that the conversation is
// absent (not readable, not listed, no rows left) and that importing the
// same file again gives the whole conversation: an import is all or
// nothing, even across a crash.
func TestKillDuringImport(t *testing.T) {
	t.Parallel()
	file, total := bigExport(t)
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "parley.db")
		killDuringImport(t, file, total, importBackend{db: db, count: sqliteCounter(t, db)})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Schema(t)
		unused := filepath.Join(t.TempDir(), "unused.db")
		// A short lease, so that a dead import is swept soon after the restart.
		be := importBackend{db: unused, args: []string{"-postgres", url, "-import-lease", "2s"}, count: postgresCounter(t, url), sweepWait: 20 * time.Second}
		killDuringImport(t, file, total, be)
	})
}

func killDuringImport(t *testing.T, file string, total int64, be importBackend) {
	start := time.Now()
	defer func() { t.Logf("took %v", time.Since(start).Round(time.Millisecond)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const id = "big"
	srv := startServer(t, be.db, be.args...)

	// parley import reads the file from a pipe that this test feeds: 40% of
	// it, then nothing until the server has made some batches durable.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, binary, "import", "-server", srv.url, "-progress", "off", "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fed := make(chan error, 1)
	go func() { _, err := stdin.Write(data[:len(data)*4/10]); fed <- err }()
	var partial int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if partial = be.count("events", id); partial >= 20_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the import wrote only %d events in 30s", partial)
		}
	}
	srv.kill()
	<-fed
	stdin.Close()
	if err := cmd.Wait(); err == nil {
		t.Fatalf("parley import succeeded though its server was killed mid-import: %s", stderr.String())
	}
	// What the dead server left: batches of a conversation it never finished.
	partial = be.count("events", id)
	if partial < 20_000 || partial >= total {
		t.Fatalf("after the kill the store holds %d of %d events: the kill was not mid-import", partial, total)
	}
	t.Logf("killed mid-import: %d of %d events were durable; the client said: %s", partial, total, strings.TrimSpace(stderr.String()))

	srv2 := startServer(t, be.db, be.args...)
	c := client.New(srv2.url, "")
	if _, err := c.Conversation(ctx, id); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("GET the half-imported conversation after the restart: %v, want not_found", err)
	}
	if _, _, err := c.Events(ctx, id, 0, 10); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("its events after the restart: %v, want not_found", err)
	}
	if listed(t, ctx, srv2.url, id) {
		t.Fatal("the half-imported conversation is listed after the restart")
	}
	for deadline := time.Now().Add(be.sweepWait); be.count("events", id) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	for _, table := range []string{"conversations", "events", "messages"} {
		col := "conversation_id"
		if table == "conversations" {
			col = "id"
		}
		if n := be.count(table+"/"+col, id); n != 0 {
			t.Fatalf("%d rows of the dead import are left in %s", n, table)
		}
	}

	// The same file imports whole, and exports as it was but for the epoch.
	out, errOut := runParleyErr(t, "import", "-server", srv2.url, "-progress", "off", file)
	if !strings.Contains(out, fmt.Sprintf("imported %s (export): %d events", id, total)) {
		t.Fatalf("import again: %s\n%s", out, errOut)
	}
	again := runParley(t, "export", "-server", srv2.url, "-format", "jsonl", id)
	epoch := regexp.MustCompile(`"epoch":"[^"]*"`)
	if a, b := epoch.ReplaceAll(bytes.TrimSpace(data), nil), epoch.ReplaceAll([]byte(again), nil); !bytes.Equal(a, b) {
		t.Fatalf("the re-imported conversation exports differently (%d vs %d bytes)", len(b), len(a))
	}
	if !listed(t, ctx, srv2.url, id) {
		t.Fatal("the imported conversation is not listed")
	}
}

// bigExport writes a JSON Lines export of conversation "big" with about
// 100k events: a question, an answer and a trace made by a real server and
// exported by it, then the trace copied under the following seqs. It
// returns the file and its number of events.
func bigExport(t *testing.T) (string, int64) {
	dir := t.TempDir()
	srv := startServer(t, filepath.Join(dir, "source.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "big", Participants: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	src := v.Conversation.ID
	if _, err := c.PostMessage(ctx, src, client.Message{ID: "q", AgentID: "human", Role: parley.RoleUser, Content: "go", Finality: parley.FinalityTurn}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, src, client.Message{ID: "r", AgentID: "a", ReplyTo: "q", Content: "working"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.url+"/v1/conversations/"+src+"/events", "application/json",
		strings.NewReader(`{"type":"trace","agentId":"a","payload":{"tool":"grep","ms":12}}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("trace: %v %v", resp, err)
	}
	resp.Body.Close()
	small := runParley(t, "export", "-server", srv.url, "-format", "jsonl", src)
	srv.kill()

	lines := strings.Split(strings.ReplaceAll(small, `"`+src+`"`, `"big"`), "\n")
	var h transfer.Header
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatal(err)
	}
	trace := lines[h.LastSeq] // line i is event i (the header is line 0)
	if !strings.Contains(trace, `"type":"trace"`) || !strings.Contains(trace, fmt.Sprintf(`"seq":%d,`, h.LastSeq)) {
		t.Fatalf("line %d is not the trace: %s", h.LastSeq, trace)
	}
	first := h.LastSeq
	h.LastSeq += crashTraces
	head, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.Write(head)
	buf.WriteByte('\n')
	for _, l := range lines[1 : first+1] {
		buf.WriteString(l + "\n")
	}
	seq := fmt.Sprintf(`"seq":%d,`, first)
	for s := first + 1; s <= h.LastSeq; s++ {
		buf.WriteString(strings.Replace(trace, seq, fmt.Sprintf(`"seq":%d,`, s), 1) + "\n")
	}
	for _, l := range lines[first+1:] {
		buf.WriteString(l + "\n")
	}
	file := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, h.LastSeq
}

// listed reports whether the first page of GET /v1/conversations holds id.
func listed(t *testing.T, ctx context.Context, url, id string) bool {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/conversations?limit=1000", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Conversations []client.View `json:"conversations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	for _, v := range page.Conversations {
		if v.Conversation.ID == id {
			return true
		}
	}
	return false
}

// sqliteCounter counts rows in the server's SQLite file, read-only, as
// another process may while the server runs. table may be "table/column".
func sqliteCounter(t *testing.T, path string) func(table, id string) int64 {
	var db *sql.DB
	t.Cleanup(func() {
		if db != nil {
			db.Close()
		}
	})
	return func(table, id string) int64 {
		t.Helper()
		if db == nil {
			if _, err := os.Stat(path); err != nil {
				return 0 // not made yet
			}
			var err error
			if db, err = sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)&_pragma=busy_timeout(5000)"); err != nil {
				t.Fatal(err)
			}
		}
		tab, col := splitColumn(table)
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM `+tab+` WHERE `+col+` = ?`, id).Scan(&n); err != nil {
			if strings.Contains(err.Error(), "no such table") {
				return 0 // not migrated yet
			}
			t.Fatal(err)
		}
		return n
	}
}

// postgresCounter counts rows in the server's PostgreSQL schema.
func postgresCounter(t *testing.T, url string) func(table, id string) int64 {
	return func(table, id string) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		tab, col := splitColumn(table)
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+tab+` WHERE `+col+` = $1`, id).Scan(&n); err != nil {
			if strings.Contains(err.Error(), "does not exist") {
				return 0 // not migrated yet
			}
			t.Fatal(err)
		}
		return n
	}
}

func splitColumn(table string) (string, string) {
	if tab, col, ok := strings.Cut(table, "/"); ok {
		return tab, col
	}
	return table, "conversation_id"
}
