package e2e

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// TestKillDuringExportAndBackupLeavesNothing kills the server (SIGKILL,
// as a crash would) while it sends an export of a conversation of about
// 40 MB and a backup of its database to clients that do not read them,
// and checks that it left no file of either anywhere: not in the system's
// temporary directory, not beside its database, not in its spool. What a
// server that died while it made a backup leaves in its spool (put there
// by the test) is removed when it starts again, and the spool is a
// directory nobody else may enter.
func TestKillDuringExportAndBackupLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the system's temporary directory, for the server
	dir := t.TempDir()
	db := filepath.Join(dir, "parley.db")
	srv := startServer(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(srv.url, "")
	v, err := c.CreateConversation(ctx, client.NewConversation{Title: "large", TurnPolicy: parley.PolicyFree})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Conversation.ID
	text := strings.Repeat("0123456789", 50_000)
	for range 40 {
		if _, err := c.PostMessage(ctx, id, client.Message{AgentID: "alice", Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	// Two clients that read the answer's first line and then nothing.
	for _, path := range []string{"/v1/conversations/" + id + "/export?format=jsonl", "/v1/admin/backup"} {
		if status := stalledGet(t, srv.url, path); !strings.Contains(status, " 200 ") {
			t.Fatalf("GET %s: %s", path, status)
		}
	}
	srv.kill()
	if left := filesIn(t, tmp); len(left) != 0 {
		t.Fatalf("the killed server left in the temporary directory: %v", left)
	}
	// Besides SQLite's own files, the file that says the server had the
	// database open (on which boot), which the next open removes.
	killedOpen := "parley.db-open-" + strconv.Itoa(srv.cmd.Process.Pid)
	beside := slices.DeleteFunc(filesIn(t, dir), func(name string) bool {
		return slices.Contains([]string{"parley.db", "parley.db-shm", "parley.db-wal", "parley.db.spool", killedOpen}, name)
	})
	if len(beside) != 0 {
		t.Fatalf("the killed server left beside its database: %v", beside)
	}
	spool := db + ".spool"
	if left := filesIn(t, spool); len(left) != 0 {
		t.Fatalf("the killed server left in its spool: %v", left)
	}

	// What a server killed while it made a backup leaves.
	for _, name := range []string{"parley-backup-1.db.partial-2", "parley-backup-3.db", "parley-backup-3.db-wal"} {
		if err := os.WriteFile(filepath.Join(spool, name), []byte("token hashes"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(spool, "notes.txt"), []byte("not the server's"), 0o600)
	srv = startServer(t, db)
	if slices.Contains(filesIn(t, dir), killedOpen) {
		t.Fatalf("the restarted server left the killed one's %s", killedOpen)
	}
	if strings.Contains(srv.log(), "new epoch") {
		t.Fatalf("a server killed on this boot lost nothing, but the restart renewed epochs:\n%s", srv.log())
	}
	if left := filesIn(t, spool); !slices.Equal(left, []string{"notes.txt"}) {
		t.Fatalf("after a restart the spool holds %v, want only what is not the server's", left)
	}
	if !strings.Contains(srv.log(), `msg="removed what the last run left in the spool"`) || !strings.Contains(srv.log(), "files=3") {
		t.Fatalf("the restart did not say what it removed:\n%s", srv.log())
	}
	if info, err := os.Stat(spool); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("the spool is %v (%v), want a directory of mode 0700", info.Mode(), err)
	}
}

// stalledGet sends GET path to the server at base over a connection with
// a small receive buffer, reads the status line of the answer, and then
// reads nothing more until the test ends: the server holds the rest. It
// returns the status line.
func stalledGet(t *testing.T, base, path string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReaderSize(conn, 256).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(status)
}

// filesIn lists the names in dir, sorted.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
